"""A release's manifest, its deterministic .tar.gz, and checking either against the manifest
(docs/releases.md, "Manifest", "Determinism"; ``manage.py verify_release``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
import zlib
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from annotation.releases.compress import GzipMember, gzip_member
from annotation.releases.formats import MEDIA_DIRS
from annotation.releases.framing import (
    FILE_MODE,
    READ_BYTES,
    ArchiveIndex,
    FolderSource,
    mapped_windows,
    write_pieces,
)
from annotation.releases.read import MANIFEST
from annotation.releases.writer import FileEntry

MANIFEST_FORMAT = "arbiter-release/1"
# Threads compressing the archive: a build is one task of a worker that may run others.
GZIP_THREADS = max(1, min(4, os.cpu_count() or 1))


def manifest_bytes(
    *, project_slug: str, splits: list[str], files: Mapping[str, FileEntry]
) -> bytes:
    manifest = {
        "format": MANIFEST_FORMAT,
        "project": project_slug,
        "splits": splits,
        "files": {
            path: {"sha256": entry.sha256, "size": entry.size}
            for path, entry in sorted(files.items())
        },
    }
    return (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode()


class ArchivePart:
    """One file's content in the archive (its bytes and the tar padding after them), as a
    gzip member compressed while the file is written; ``HashingFile`` feeds it."""

    def __init__(self, path: Path, *, pool: Executor, most_pending: int):
        self.path = path
        self._file = open(path, "wb")  # noqa: SIM115 -- closed by close()
        self._member = GzipMember(self._file, pool=pool, most_pending=most_pending)
        self.size = 0
        self.closed = False

    def write(self, data) -> int:
        self.size += len(data)
        return self._member.write(data)

    def close(self) -> None:
        self._member.write(b"\0" * (-self.size % tarfile.BLOCKSIZE))
        self._member.close()
        self._file.close()
        self.closed = True


# The release's media folders: their files' members are stored, not deflated.
STORED_DIRS = frozenset(MEDIA_DIRS.values())


def stored_in_archive(relative: str) -> bool:
    """Whether the file at ``relative`` in the release is stored in the archive undeflated."""
    return PurePosixPath(relative).parts[0] in STORED_DIRS


class StoredPart:
    """A media file's content in the archive: the ``size`` bytes of the release's file
    ``relative``, stored; never copied at build (the archive reads it from the folder)."""

    def __init__(self, size: int):
        self.size = size
        self.closed = True


class ArchiveParts:
    """The members of a release's .tar.gz, made while its files are written (so compressing
    overlaps building): for each file in path order, a member with its tar header and a
    member with its content; then one with the end-of-archive blocks. Every member's bytes
    depend only on the file, so the archive does too. Tar headers: the file under the
    ``root`` folder, mtime 0, owner 0:0 without names, mode 644. ``frame`` writes every
    member but the media files' contents as the skeleton, with the index that places them
    (``annotation.releases.framing``)."""

    def __init__(self, folder: Path, *, root: str, threads: int = GZIP_THREADS):
        self._folder = folder
        self._root = root
        self._threads = threads
        self._pool = ThreadPoolExecutor(max_workers=threads)
        self._parts: dict[str, ArchivePart | StoredPart] = {}
        folder.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> ArchiveParts:
        return self

    def __exit__(self, *exc_info) -> None:
        self._pool.shutdown(cancel_futures=True)
        for part in self._parts.values():
            if isinstance(part, ArchivePart) and not part.closed:  # a build that failed
                part._file.close()

    def part(self, relative: str) -> ArchivePart:
        part = ArchivePart(
            self._folder / f"{len(self._parts)}.gz", pool=self._pool, most_pending=2 * self._threads
        )
        self._parts[relative] = part
        return part

    def stored(self, relative: str, size: int) -> None:
        """``relative``'s member will be the release's file ``relative`` (``size`` bytes),
        stored."""
        self._parts[relative] = StoredPart(size)

    def _header(self, relative: str, size: int) -> bytes:
        info = tarfile.TarInfo(f"{self._root}/{relative}")
        info.size = size
        info.mtime = 0
        info.mode = FILE_MODE
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")

    def frame(self, skeleton: Path) -> tuple[ArchiveIndex, FileEntry]:
        """Writes the skeleton (every part closed) to ``skeleton``: each file's header member,
        each data file's member, the end member; returns the archive's index and the
        skeleton's entry."""
        index = ArchiveIndex()
        length = 0

        def pieces() -> Iterator[bytes | memoryview]:
            nonlocal length
            for relative in sorted(self._parts):
                part = self._parts[relative]
                header = self._header(relative, part.size)
                length += len(header) + part.size + (-part.size % tarfile.BLOCKSIZE)
                member = gzip_member(header)
                index.add_skeleton(len(member))
                yield member
                if isinstance(part, StoredPart):
                    index.add_media(relative, part.size)
                    continue
                index.add_skeleton(part.path.stat().st_size)
                yield from mapped_windows(part.path)
            end = b"\0" * (2 * tarfile.BLOCKSIZE)
            length += len(end)
            member = gzip_member(end + b"\0" * (-length % tarfile.RECORDSIZE))
            index.add_skeleton(len(member))
            yield member

        return index, FileEntry(*write_pieces(skeleton, pieces()))


def _files(folder: Path) -> list[str]:
    """Every file under ``folder`` as a POSIX path relative to it, sorted."""
    return sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()
    )


def archive_write(folder: Path, archive: Path, *, root: str, work: Path) -> FileEntry:
    """``folder`` as one .tar.gz under the directory ``root`` (``work``: a scratch folder):
    the same bytes a build's skeleton and index give for the same files."""
    with ArchiveParts(work, root=root) as parts:
        for relative in _files(folder):
            if stored_in_archive(relative):
                parts.stored(relative, (folder / relative).stat().st_size)
                continue
            part = parts.part(relative)
            with open(folder / relative, "rb") as handle:
                while block := handle.read(READ_BYTES):
                    part.write(block)
            part.close()
        index, _ = parts.frame(work / "skeleton")
    return FileEntry(*write_pieces(archive, index.pieces(FolderSource(work / "skeleton", folder))))


def file_digest(handle) -> FileEntry:
    """The sha256 and size of what is left to read in ``handle`` (a binary file)."""
    digest, size = hashlib.sha256(), 0
    while block := handle.read(READ_BYTES):
        digest.update(block)
        size += len(block)
    return FileEntry(digest.hexdigest(), size)


def _compare(
    listed: Mapping[str, Mapping], found: Mapping[str, FileEntry], *, complete: bool = True
) -> list[str]:
    """One line per file that differs; ``complete=False``: what was found is not all there
    is (a damaged archive), so files not found are not called missing."""
    problems = []
    for path in sorted(set(listed) | set(found)):
        if path not in found:
            if complete:
                problems.append(f"{path}: missing")
        elif path not in listed:
            problems.append(f"{path}: not in the manifest")
        elif found[path].size != listed[path]["size"]:
            problems.append(
                f"{path}: size {found[path].size} bytes, the manifest says {listed[path]['size']}"
            )
        elif found[path].sha256 != listed[path]["sha256"]:
            problems.append(f"{path}: sha256 differs from the manifest")
    return problems


def _manifest_problems(data: bytes | None, manifest_sha256: str | None) -> tuple[dict, list[str]]:
    if data is None:
        return {}, [f"{MANIFEST}: missing"]
    if manifest_sha256 and hashlib.sha256(data).hexdigest() != manifest_sha256:
        return {}, [f"{MANIFEST}: sha256 differs from the one the release recorded"]
    try:
        manifest = json.loads(data)
        files = manifest["files"]
        if not isinstance(files, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return {}, [f"{MANIFEST}: not a release manifest"]
    return files, []


def verify_folder(folder: Path, *, manifest_sha256: str | None = None) -> list[str]:
    """What differs between the release in ``folder`` and its manifest (and, given, the
    manifest's recorded hash): one line per file, empty when all match."""
    manifest_path = folder / MANIFEST
    data = manifest_path.read_bytes() if manifest_path.is_file() else None
    listed, problems = _manifest_problems(data, manifest_sha256)
    if problems:
        return problems
    found = {}
    for relative in _files(folder):
        if relative != MANIFEST:
            with open(folder / relative, "rb") as handle:
                found[relative] = file_digest(handle)
    return _compare(listed, found)


def verify_archive(archive: Path, *, manifest_sha256: str | None = None) -> list[str]:
    """As ``verify_folder``, for the release's .tar.gz (read once, never extracted). The
    gzip stream is read to its end, so a damaged archive is named as such (its CRC), and so is
    each file that reads back different."""
    found: dict[str, FileEntry] = {}
    data = None
    roots = set()
    damaged = None
    try:
        with gzip.open(archive, "rb") as stream, tarfile.open(fileobj=stream, mode="r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                parts = PurePosixPath(member.name).parts
                roots.add(parts[0])
                relative = "/".join(parts[1:])
                handle = tar.extractfile(member)
                assert handle is not None  # a regular file
                if relative == MANIFEST:
                    data = handle.read()
                else:
                    found[relative] = file_digest(handle)
            # tarfile stops quietly at a damaged header: what is left must still decompress.
            while stream.read(READ_BYTES):
                pass
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        damaged = f"{archive.name}: not a readable .tar.gz ({exc})"
    if len(roots) > 1:
        return [f"{archive.name}: more than one folder at the top ({', '.join(sorted(roots))})"]
    if data is None and damaged:
        return [damaged]
    listed, problems = _manifest_problems(data, manifest_sha256)
    return (problems or _compare(listed, found, complete=damaged is None)) + (
        [damaged] if damaged else []
    )


def verify_release_path(path: Path, *, manifest_sha256: str | None = None) -> list[str]:
    """A folder or a .tar.gz, whichever ``path`` is."""
    if path.is_dir():
        return verify_folder(path, manifest_sha256=manifest_sha256)
    return verify_archive(path, manifest_sha256=manifest_sha256)
