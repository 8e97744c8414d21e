"""gzip written by threads (the deflate lets go of the GIL), as pigz does, with bytes that
depend only on the data and the compressor: it is cut into BLOCK_BYTES blocks, each deflated
on its own with the 32 KiB before it as its dictionary and ended by a sync flush, and the
pieces are joined in order into one deflate stream; the header has no file name and mtime 0.
A release's archive is such gzip members one after the other
(``annotation.releases.archive``), which every gzip reader reads as one stream. A media file's
member is stored, not deflated (``stored_member``): MP4, M4A, PNG and GLB are compressed
already."""

from __future__ import annotations

import io
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future

from isal import isal_zlib

# The deflate is ISA-L's (python-isal, pinned exactly in pyproject.toml: the archive's bytes
# depend on its version as on the level). Its level 1, on a release's JSON, is about four
# times as fast as zlib's level 1 for archives a little smaller, and about ten times on
# Parquet, which neither can shrink (docs/releases.md, "Speed").
GZIP_LEVEL = 1
# ISA-L's buffer size (memLevel), fixed: the bytes depend on it.
_MEM_LEVEL = isal_zlib.DEF_MEM_LEVEL
BLOCK_BYTES = 1024 * 1024
# The largest stored deflate block (its length is 16 bits).
_STORED_BLOCK = 0xFFFF
_WINDOW = 32 * 1024
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, OS unknown


def _deflate(level: int, block: bytes, dictionary: bytes, last: bool) -> bytes:
    settings = (level, isal_zlib.DEFLATED, -isal_zlib.MAX_WBITS, _MEM_LEVEL)
    if dictionary:
        deflate = isal_zlib.compressobj(*settings, zdict=dictionary)
    else:
        deflate = isal_zlib.compressobj(*settings)
    flush = isal_zlib.Z_FINISH if last else isal_zlib.Z_SYNC_FLUSH
    return deflate.compress(block) + deflate.flush(flush)


class GzipMember:
    """One gzip member written to ``out`` (a binary file), its blocks deflated on ``pool``."""

    def __init__(self, out, *, pool: Executor, most_pending: int = 4, level: int = GZIP_LEVEL):
        self._out = out
        self._pool = pool
        self._level = level
        self._most_pending = most_pending
        self._pending: deque = deque()
        self._buffer = bytearray()
        self._previous_tail = b""
        self._crc = 0
        self.size = 0  # bytes taken in, uncompressed
        out.write(_HEADER)

    def _submit(self, block: bytes, last: bool) -> None:
        self._crc = isal_zlib.crc32(block, self._crc)
        self.size += len(block)
        deflated = self._pool.submit(_deflate, self._level, block, self._previous_tail, last)
        self._pending.append(deflated)
        self._previous_tail = block[-_WINDOW:]
        while len(self._pending) > self._most_pending:
            self._out.write(self._pending.popleft().result())

    def write(self, data) -> int:
        # Whole blocks are cut from ``data`` itself: a long write appended to the buffer and cut
        # from its front moved the rest of it once per block. Each block is a copy (the
        # caller may reuse its buffer once this returns).
        view = memoryview(data).cast("B")
        size = len(view)
        if self._buffer:
            taken = BLOCK_BYTES - len(self._buffer)
            self._buffer += view[:taken]
            view = view[taken:]
            if len(self._buffer) < BLOCK_BYTES:
                return size
            self._submit(bytes(self._buffer), last=False)
            self._buffer = bytearray()
        start = 0
        while len(view) - start >= BLOCK_BYTES:
            self._submit(bytes(view[start : start + BLOCK_BYTES]), last=False)
            start += BLOCK_BYTES
        self._buffer += view[start:]
        return size

    def close(self) -> None:
        """Deflates what is left and writes the trailer; ``out`` stays open."""
        self._submit(bytes(self._buffer), last=True)
        self._buffer = bytearray()
        while self._pending:
            self._out.write(self._pending.popleft().result())
        self._out.write(struct.pack("<II", self._crc, self.size & 0xFFFFFFFF))


class _Inline(Executor):
    """Runs each submitted call at once, in the caller's thread."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        done: Future = Future()
        done.set_result(fn(*args, **kwargs))
        return done


def gzip_member(data: bytes) -> bytes:
    """``data`` as one gzip member: a GzipMember deflating in this thread (a tar header's
    member is a few hundred bytes: a thread pool cost more than the deflate)."""
    out = io.BytesIO()
    member = GzipMember(out, pool=_Inline())
    member.write(data)
    member.close()
    return out.getvalue()


def stored_crc(windows: Iterable, *, padding: int) -> int:
    """The CRC-32 of a file's bytes (``windows``: buffers in order) followed by ``padding``
    zero bytes: what its stored member's trailer holds."""
    crc = 0
    for window in windows:
        crc = isal_zlib.crc32(window, crc)
    return isal_zlib.crc32(b"\0" * padding, crc)


def stored_member_size(size: int, padding: int) -> int:
    """The length of ``stored_member``'s bytes for a file of ``size`` bytes and ``padding``."""
    blocks = 0
    for start in range(0, max(size, 1), BLOCK_BYTES):
        length = min(BLOCK_BYTES, size - start) + (padding if start + BLOCK_BYTES >= size else 0)
        blocks += max(1, -(-length // _STORED_BLOCK))
    return len(_HEADER) + size + padding + 5 * blocks + 8


def stored_member(
    windows: Iterable[memoryview], *, size: int, padding: int, crc: int | Callable[[], int]
) -> Iterator[bytes | memoryview]:
    """The ``size`` bytes of a file, given as ``windows`` (its mapped pages in order, each but
    the last a whole number of BLOCK_BYTES), then ``padding`` zero bytes, as one gzip member of
    stored deflate blocks, in pieces to be written or hashed in order: the header, each
    block's five bytes (a header byte, LEN, NLEN) and its bytes (slices of the windows, never
    copied), the trailer with ``crc`` (``stored_crc``; or a call that gives it once the
    windows are read). Blocks hold at most 64 KiB and each
    MiB of the file starts a new one, so the bytes depend only on the data. Raises
    ``ValueError`` when the windows do not hold ``size`` bytes."""
    yield _HEADER
    done = 0
    for window in windows:
        for start in range(0, len(window), BLOCK_BYTES):
            chunk = window[start : start + BLOCK_BYTES]
            done += len(chunk)
            last = done == size
            yield from _stored_blocks(chunk, padding if last else 0, final=last)
    if done != size:
        raise ValueError(f"the file holds {done} bytes, not {size}")
    if not size:
        yield from _stored_blocks(memoryview(b""), padding, final=True)
    yield struct.pack("<II", crc if isinstance(crc, int) else crc(), (size + padding) & 0xFFFFFFFF)


def _stored_blocks(data: memoryview, padding: int, *, final: bool) -> Iterator[bytes | memoryview]:
    """``data`` then ``padding`` zero bytes as stored blocks of at most 64 KiB, the last one
    marked final when ``final``: each block's five bytes, then its slice of ``data`` and its
    zeros."""
    length = len(data) + padding
    for start in range(0, max(length, 1), _STORED_BLOCK):
        block = min(_STORED_BLOCK, length - start)
        yield struct.pack("<BHH", int(final and start + block == length), block, block ^ 0xFFFF)
        if start < len(data):
            yield data[start : start + block]
        zeros = start + block - max(start, len(data))
        if zeros > 0:
            yield b"\0" * zeros
