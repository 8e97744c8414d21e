"""A release's manifest, its deterministic .tar.gz, and checking either against the manifest
(docs/releases.md, "Manifest", "Determinism"; ``manage.py verify_release``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
import zlib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from annotation.releases.read import MANIFEST
from annotation.releases.writer import FileEntry, HashingFile

MANIFEST_FORMAT = "arbiter-release/1"
# gzip's level: fixed (the bytes depend on it); 6 is zlib's default balance of size and time.
GZIP_LEVEL = 6
_READ_BYTES = 1024 * 1024
_FILE_MODE = 0o644


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


def _files(folder: Path) -> list[str]:
    """Every file under ``folder`` as a POSIX path relative to it, sorted."""
    return sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()
    )


def archive_write(folder: Path, archive: Path, *, root: str) -> FileEntry:
    """``folder`` as one .tar.gz under the directory ``root``: entries sorted, every
    timestamp 0, owner 0:0 without names, mode 644, gzip header without name or time; the same
    files always give the same bytes."""
    out = HashingFile(archive)
    try:
        with (
            gzip.GzipFile(
                filename="", mode="wb", fileobj=out, compresslevel=GZIP_LEVEL, mtime=0
            ) as compressed,
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for relative in _files(folder):
                path = folder / relative
                info = tarfile.TarInfo(f"{root}/{relative}")
                info.size = path.stat().st_size
                info.mtime = 0
                info.mode = _FILE_MODE
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
    finally:
        out.close()
    return out.entry


def _digest(handle) -> FileEntry:
    digest, size = hashlib.sha256(), 0
    while block := handle.read(_READ_BYTES):
        digest.update(block)
        size += len(block)
    return FileEntry(digest.hexdigest(), size)


def _compare(listed: Mapping[str, Mapping], found: Mapping[str, FileEntry]) -> list[str]:
    problems = []
    for path in sorted(set(listed) | set(found)):
        if path not in found:
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
                found[relative] = _digest(handle)
    return _compare(listed, found)


def verify_archive(archive: Path, *, manifest_sha256: str | None = None) -> list[str]:
    """As ``verify_folder``, for the release's .tar.gz (read once, never extracted)."""
    found: dict[str, FileEntry] = {}
    data = None
    roots = set()
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
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
                    found[relative] = _digest(handle)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        return [f"{archive.name}: not a readable .tar.gz ({exc})"]
    if len(roots) > 1:
        return [f"{archive.name}: more than one folder at the top ({', '.join(sorted(roots))})"]
    listed, problems = _manifest_problems(data, manifest_sha256)
    return problems or _compare(listed, found)


def verify_release_path(path: Path, *, manifest_sha256: str | None = None) -> list[str]:
    """A folder or a .tar.gz, whichever ``path`` is."""
    if path.is_dir():
        return verify_folder(path, manifest_sha256=manifest_sha256)
    return verify_archive(path, manifest_sha256=manifest_sha256)
