"""A release's .tar.gz made from its folder whenever it is read (docs/releases.md, "The
archive"). A build keeps the bytes of every member that is not a media file's content (the tar
headers, the data files' deflated members, the end blocks) as one *skeleton* file, and an
*index* of the archive's segments: a run of the skeleton's bytes, or a media file of the
folder as a stored gzip member. A download, a range of one, publishing's hash and
``create_release --out`` read the archive through here: the same bytes every time, with each
media byte stored once (in the folder)."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import NamedTuple, Protocol

from isal import isal_zlib

from annotation.releases.compress import (
    BLOCK_BYTES,
    stored_crc,
    stored_member,
    stored_member_size,
)

INDEX_FORMAT = "arbiter-archive-index/1"
READ_BYTES = 1024 * 1024
# Pieces given to one writev (Linux's IOV_MAX).
_IOV_MAX = 1024
# Files are mapped this many bytes at a time: a whole number of BLOCK_BYTES, as
# ``stored_member`` takes them.
_WINDOW_BYTES = 16 * BLOCK_BYTES
FILE_MODE = 0o644
# Pieces handed to a download are joined up to this size (a stored block's five bytes are a
# piece of their own).
_DOWNLOAD_CHUNK = 256 * 1024


class Digest(NamedTuple):
    sha256: str
    size: int


@dataclass
class Segment:
    """``length`` bytes of the archive from ``start``: the skeleton's from ``skeleton_at``, or
    (``path`` set) the stored member of the release's media file ``path`` (``size`` bytes; its
    trailer's CRC-32 ``crc``, once taken)."""

    start: int
    length: int
    skeleton_at: int = 0
    path: str = ""
    size: int = 0
    crc: int | None = None

    @property
    def padding(self) -> int:
        return -self.size % tarfile.BLOCKSIZE


class ArchiveSource(Protocol):
    """Where an archive's bytes come from: its skeleton and the release's media files."""

    def skeleton(self, start: int, length: int) -> Iterable[bytes | memoryview]:
        """``length`` bytes of the skeleton from ``start``."""

    def media(self, path: str) -> Iterable[memoryview]:
        """The bytes of the media file ``path`` in order, each piece but the last a whole
        number of ``BLOCK_BYTES`` (as ``stored_member`` takes them)."""


class ArchiveIndex:
    """The archive's segments, in order; a skeleton segment is added as its bytes are, a
    media one by its file's size (its member's length depends on that alone)."""

    def __init__(self, segments: list[Segment] | None = None) -> None:
        self.segments = segments or []

    @property
    def size(self) -> int:
        return self.segments[-1].start + self.segments[-1].length if self.segments else 0

    def add_skeleton(self, length: int) -> None:
        last = self.segments[-1] if self.segments else None
        if last is not None and not last.path:
            last.length += length
            return
        # The new run starts where the skeleton's last run ends (a step or two back: runs and
        # media members alternate).
        skeleton_at = 0
        for segment in reversed(self.segments):
            if not segment.path:
                skeleton_at = segment.skeleton_at + segment.length
                break
        self.segments.append(Segment(self.size, length, skeleton_at=skeleton_at))

    def add_media(self, path: str, size: int) -> None:
        length = stored_member_size(size, -size % tarfile.BLOCKSIZE)
        self.segments.append(Segment(self.size, length, path=path, size=size))

    def to_bytes(self) -> bytes:
        rows = [
            [s.start, s.length, "media", s.path, s.size, s.crc]
            if s.path
            else [s.start, s.length, "skeleton", s.skeleton_at]
            for s in self.segments
        ]
        return json.dumps({"format": INDEX_FORMAT, "segments": rows}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> ArchiveIndex:
        document = json.loads(data)
        if document.get("format") != INDEX_FORMAT:
            raise ValueError(f"not an archive index ({document.get('format')!r})")
        segments = []
        for row in document["segments"]:
            if row[2] == "media":
                start, length, _, path, size, crc = row
                segments.append(Segment(start, length, path=path, size=size, crc=crc))
            else:
                start, length, _, skeleton_at = row
                segments.append(Segment(start, length, skeleton_at=skeleton_at))
        index = cls(segments)
        index._check()
        return index

    def _check(self) -> None:
        at = skeleton_at = 0
        for segment in self.segments:
            if segment.start != at or segment.length < 0:
                raise ValueError(f"the archive index has a gap or overlap at byte {at}")
            if not segment.path:
                if segment.skeleton_at != skeleton_at:
                    raise ValueError(f"the archive index skips skeleton bytes at byte {at}")
                skeleton_at += segment.length
            parts = PurePosixPath(segment.path).parts
            if segment.path and (PurePosixPath(segment.path).is_absolute() or ".." in parts):
                raise ValueError(f"the archive index names {segment.path!r}, not in the folder")
            if segment.path and segment.length != stored_member_size(segment.size, segment.padding):
                raise ValueError(f"the archive index's segment of {segment.path} has a bad length")
            at += segment.length

    def pieces(
        self, source: ArchiveSource, *, start: int = 0, end: int | None = None
    ) -> Iterator[bytes | memoryview]:
        """The archive's bytes from ``start`` to ``end`` (excluded; the end of the archive
        when None), in order. A media member read from its start takes its CRC-32 on the way
        (and keeps it in the index); one entered part-way whose CRC is not known yet is read
        once for it first. Media bytes are slices of what ``source`` gives, never copied."""
        end = self.size if end is None else min(end, self.size)
        for segment in self.segments:
            stop = segment.start + segment.length
            if stop <= start or segment.start >= end:
                continue
            skip, take = max(0, start - segment.start), min(stop, end) - max(start, segment.start)
            if not segment.path:
                yield from source.skeleton(segment.skeleton_at + skip, take)
                continue
            yield from _slice(self._member(segment, source, whole=skip == 0), skip, take)

    @staticmethod
    def _member(segment: Segment, source: ArchiveSource, *, whole: bool) -> Iterator:
        if segment.crc is None and not whole:
            segment.crc = stored_crc(source.media(segment.path), padding=segment.padding)
        if segment.crc is not None:
            return stored_member(
                source.media(segment.path),
                size=segment.size,
                padding=segment.padding,
                crc=segment.crc,
            )
        running = [0]

        def taken(windows: Iterable[memoryview]) -> Iterator[memoryview]:
            for window in windows:
                running[0] = isal_zlib.crc32(window, running[0])
                yield window

        def crc() -> int:
            segment.crc = isal_zlib.crc32(b"\0" * segment.padding, running[0])
            return segment.crc

        return stored_member(
            taken(source.media(segment.path)), size=segment.size, padding=segment.padding, crc=crc
        )

    def chunks(self, source: ArchiveSource, *, start: int, length: int) -> Iterator[bytes]:
        """Bytes ``start`` to ``start + length`` as chunks of about 256 KiB, for a download."""
        pending: list[bytes | memoryview] = []
        held = 0
        for piece in self.pieces(source, start=start, end=start + length):
            pending.append(piece)
            held += len(piece)
            if held >= _DOWNLOAD_CHUNK:
                yield b"".join(pending)
                pending, held = [], 0
        if pending:
            yield b"".join(pending)


def mapped_windows(path: Path) -> Iterator[memoryview]:
    """The bytes of the file at ``path`` in order, mapped read-only a window of
    ``_WINDOW_BYTES`` at a time (the page cache's own pages, never copied into the process);
    each window is unmapped once its last view is gone, so a process maps a few windows at
    once whatever the size of a video."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        for offset in range(0, size, _WINDOW_BYTES):
            length = min(_WINDOW_BYTES, size - offset)
            window = mmap.mmap(handle.fileno(), length, offset=offset, access=mmap.ACCESS_READ)
            yield memoryview(window)


def _write_all(fd: int, pieces: list) -> None:
    """``pieces`` (at most ``_IOV_MAX``) written to ``fd`` in order, in as few system calls
    as the kernel takes them; the list is emptied."""
    first = 0
    while first < len(pieces):
        written = os.writev(fd, pieces[first:])
        while first < len(pieces) and written >= len(pieces[first]):
            written -= len(pieces[first])
            first += 1
        if written:
            pieces[first] = memoryview(pieces[first])[written:]
    pieces.clear()


def write_pieces(path: Path, pieces: Iterable[bytes | memoryview]) -> Digest:
    """``pieces`` written to a new file at ``path`` (``writev``, up to 1,024 pieces a call),
    with their sha256 and size."""
    digest, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        batch: list = []
        for piece in pieces:
            batch.append(piece)
            digest.update(piece)
            size += len(piece)
            if len(batch) == _IOV_MAX:
                _write_all(fd, batch)
        _write_all(fd, batch)
    finally:
        os.close(fd)
    return Digest(digest.hexdigest(), size)


class FolderSource:
    """An archive's bytes from a skeleton file and a release folder on local disk, each
    media file mapped (``framing.ArchiveSource``)."""

    def __init__(self, skeleton: Path, folder: Path):
        self._skeleton = skeleton
        self._folder = folder

    def skeleton(self, start: int, length: int) -> Iterator[bytes]:
        with open(self._skeleton, "rb") as handle:
            handle.seek(start)
            while length > 0:
                block = handle.read(min(READ_BYTES, length))
                if not block:
                    raise ValueError(f"{self._skeleton.name} is shorter than its index says")
                length -= len(block)
                yield block

    def media(self, path: str) -> Iterator[memoryview]:
        target = self._folder / path
        # As a single file's download: never a link, nor anything outside the folder.
        if target.is_symlink() or not target.resolve().is_relative_to(self._folder.resolve()):
            raise ValueError(f"{path} is not a file of the release folder")
        yield from mapped_windows(target)


def _slice(pieces: Iterable[bytes | memoryview], skip: int, take: int) -> Iterator:
    """``take`` bytes of ``pieces`` after the first ``skip``: the pieces before are passed by
    without being touched (a mapped file's pages are not read)."""
    at = 0
    for piece in pieces:
        length = len(piece)
        if at + length <= skip:
            at += length
            continue
        first = max(0, skip - at)
        last = min(length, skip + take - at)
        yield piece if (first, last) == (0, length) else memoryview(piece)[first:last]
        at += length
        if at >= skip + take:
            return


def block_windows(chunks: Iterable[bytes]) -> Iterator[memoryview]:
    """``chunks`` of any size (a stored object read as it arrives) as pieces each a whole
    number of ``BLOCK_BYTES`` but the last."""
    held = bytearray()
    for chunk in chunks:
        held += chunk
        whole = len(held) - len(held) % BLOCK_BYTES
        if whole:
            yield memoryview(bytes(held[:whole]))
            del held[:whole]
    if held:
        yield memoryview(bytes(held))
