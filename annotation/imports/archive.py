"""Unpacking an uploaded .zip or .tar.gz of media into a private folder, safely: regular files
only (no links, devices or absolute names), nothing outside the folder, and size caps checked
on the bytes actually written, not on what the archive claims."""

from __future__ import annotations

import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from django.conf import settings

MAX_MEMBERS = 200_000


class ArchiveError(Exception):
    """The archive was refused; the message says why."""


def archive_extract(*, source: Path | BinaryIO, dest: Path) -> int:
    """Unpacks a zip or (gzip/bz2/xz) tar archive into ``dest``; returns the files written.
    Each member may be at most the largest per-file limit (images, video, audio, 3D; each
    file is checked against its own kind's limit when it is read), all of them together at
    most ARBITER_MAX_UPLOAD_BYTES."""
    handle = open(source, "rb") if isinstance(source, str | Path) else source  # noqa: SIM115
    try:
        magic = handle.read(4)
        handle.seek(0)
        extractor = _Extractor(dest)
        if magic.startswith(b"PK\x03\x04") or magic.startswith(b"PK\x05\x06"):
            extractor.zip(handle)
        else:
            extractor.tar(handle)
        return extractor.files
    finally:
        if handle is not source:
            handle.close()


class _Extractor:
    def __init__(self, dest: Path):
        self.dest = Path(dest).resolve()
        self.dest.mkdir(parents=True, exist_ok=True)
        self.member_limit = max(
            settings.ARBITER_MAX_IMAGE_BYTES,
            settings.ARBITER_MAX_VIDEO_BYTES,
            settings.ARBITER_MAX_AUDIO_BYTES,
            settings.ARBITER_MAX_MODEL3D_BYTES,
        )
        self.total_limit = settings.ARBITER_MAX_UPLOAD_BYTES
        self.total = 0
        self.files = 0
        self.seen: set[str] = set()

    def zip(self, handle: BinaryIO) -> None:
        try:
            archive = zipfile.ZipFile(handle)
        except zipfile.BadZipFile as exc:
            raise ArchiveError(f"not a readable zip file: {exc}") from None
        with archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                # Zip stores a Unix file type only when made on Unix; none means a plain file.
                file_type = stat.S_IFMT(info.external_attr >> 16)
                if file_type and file_type != stat.S_IFREG:
                    raise ArchiveError(f"{info.filename!r} is not a regular file (a link?)")
                target = self._target(info.filename, info.file_size)
                try:
                    with archive.open(info) as member:
                        self._copy(member, target, info.filename)
                except (zipfile.BadZipFile, OSError, NotImplementedError) as exc:
                    raise ArchiveError(f"cannot read {info.filename!r}: {exc}") from None

    def tar(self, handle: BinaryIO) -> None:
        try:
            # Stream mode ("r|*") reads members in order, never seeking back.
            archive = tarfile.open(fileobj=handle, mode="r|*")  # noqa: SIM115 - entered below
        except tarfile.TarError as exc:
            raise ArchiveError(f"not a zip or tar archive: {exc}") from None
        try:
            with archive:
                for member in archive:
                    if member.isdir():
                        continue
                    if not member.isfile():
                        raise ArchiveError(
                            f"{member.name!r} is not a regular file (links and devices are refused)"
                        )
                    target = self._target(member.name, member.size)
                    source = archive.extractfile(member)
                    if source is None:  # only regular files reach here, and each has a body
                        raise ArchiveError(f"cannot read {member.name!r}")
                    self._copy(source, target, member.name)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"cannot read the archive: {exc}") from None

    def _target(self, name: str, declared_size: int) -> Path:
        self.files += 1
        if self.files > MAX_MEMBERS:
            raise ArchiveError(f"more than {MAX_MEMBERS} files")
        path = PurePosixPath(name)
        if path.is_absolute() or name.startswith("\\") or "\x00" in name:
            raise ArchiveError(f"{name!r} has an absolute path")
        if ".." in path.parts:
            raise ArchiveError(f"{name!r} contains '..'")
        parts = [part for part in path.parts if part not in ("", ".")]
        if not parts:
            raise ArchiveError(f"{name!r} has no file name")
        key = "/".join(parts)
        if key in self.seen:
            raise ArchiveError(f"{name!r} appears twice")
        self.seen.add(key)
        if declared_size > self.member_limit:
            raise ArchiveError(f"{name!r} is larger than {self.member_limit:,} bytes")
        target = self.dest.joinpath(*parts)
        if not target.resolve().is_relative_to(self.dest):
            raise ArchiveError(f"{name!r} leads outside the archive")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            raise ArchiveError(f"{name!r} is inside a path that is also a file") from None
        return target

    def _copy(self, source: IO[bytes], target: Path, name: str) -> None:
        written = 0
        with open(target, "xb") as out:
            while chunk := source.read(1 << 20):
                written += len(chunk)
                self.total += len(chunk)
                if written > self.member_limit:
                    raise ArchiveError(f"{name!r} is larger than {self.member_limit:,} bytes")
                if self.total > self.total_limit:
                    raise ArchiveError(
                        f"the archive unpacks to more than {self.total_limit:,} bytes"
                    )
                out.write(chunk)
