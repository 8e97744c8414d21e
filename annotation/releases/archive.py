"""A release's manifest, its deterministic .tar.gz, and checking either against the manifest
(docs/releases.md, "Manifest", "Determinism"; ``manage.py verify_release``)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tarfile
import zlib
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, cast

from annotation.releases.read import MANIFEST
from annotation.releases.writer import FileEntry, HashingFile

MANIFEST_FORMAT = "arbiter-release/1"
# gzip's level: fixed (the bytes depend on it). 1: on release text it is about three times as
# fast as zlib's default 6 for archives about a tenth larger (benchmarks/release_speed.py).
GZIP_LEVEL = 1
# Threads compressing the archive: a build is one task of a worker that may run others.
GZIP_THREADS = max(1, min(4, os.cpu_count() or 1))
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


class _ParallelGzip:
    """A write-only gzip stream compressed by threads (zlib lets go of the GIL), as pigz does:
    the data is cut into BLOCK_BYTES blocks, each deflated on its own with the 32 KiB before
    it as its dictionary and ended by a sync flush, and the pieces are joined in order into
    one deflate stream. The bytes depend only on the data, the level and the block size,
    never on the threads' timing. The header has no file name and mtime 0."""

    BLOCK_BYTES = 1024 * 1024
    _WINDOW = 32 * 1024
    _HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0

    def __init__(self, out, *, level: int, threads: int):
        self._out = out
        self._level = level
        self._pool = ThreadPoolExecutor(max_workers=threads)
        self._pending: deque = deque()
        self._most_pending = 2 * threads
        self._buffer = bytearray()
        self._previous_tail = b""
        self._crc = 0
        self._size = 0
        out.write(self._HEADER)

    def _deflate(self, block: bytes, dictionary: bytes, last: bool) -> bytes:
        if dictionary:
            deflate = zlib.compressobj(
                self._level, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=dictionary
            )
        else:
            deflate = zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS)
        return deflate.compress(block) + deflate.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)

    def _submit(self, block: bytes, last: bool) -> None:
        self._crc = zlib.crc32(block, self._crc)
        self._size += len(block)
        self._pending.append(self._pool.submit(self._deflate, block, self._previous_tail, last))
        self._previous_tail = block[-self._WINDOW :]
        while len(self._pending) > self._most_pending:
            self._out.write(self._pending.popleft().result())

    def write(self, data) -> int:
        self._buffer += data
        while len(self._buffer) >= self.BLOCK_BYTES:
            block = bytes(self._buffer[: self.BLOCK_BYTES])
            del self._buffer[: self.BLOCK_BYTES]
            self._submit(block, last=False)
        return len(data)

    def tell(self) -> int:
        """Bytes written so far, uncompressed (what tarfile counts its offsets in)."""
        return self._size + len(self._buffer)

    def close(self) -> None:
        self._submit(bytes(self._buffer), last=True)
        self._buffer = bytearray()
        while self._pending:
            self._out.write(self._pending.popleft().result())
        self._pool.shutdown()
        self._out.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))


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
    compressed = _ParallelGzip(out, level=GZIP_LEVEL, threads=GZIP_THREADS)
    try:
        # A write-only stream: tarfile only writes to it and asks where it is.
        stream = cast(Any, compressed)
        with tarfile.TarFile(
            fileobj=stream, mode="w", format=tarfile.PAX_FORMAT, copybufsize=_READ_BYTES
        ) as tar:
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
        compressed.close()
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
