"""Removes metadata (EXIF, XMP, IPTC, comments, text chunks) from an image without touching
its pixels, so a generator's name written there never reaches an annotator.

Stripping works on the container: segments, chunks and blocks that carry metadata are dropped
and the compressed image data is copied byte for byte (re-encoding a JPEG would change its
pixels). Only an EXIF orientation other than the default survives, rewritten as a TIFF block
holding nothing else, because browsers rotate by it. Colour profiles are rebuilt with their
colours only (``icc.py``), chunks padded past their length go, and a JPEG scan's data ends at
the last byte a decoder reads (``jpeg_scan.py``). The result is decoded with Pillow and must
equal the original frame for frame; when container stripping cannot be done or verified, a
PNG or GIF is re-encoded (and verified again) and a JPEG or WebP keeps its original bytes.
See docs/architecture.md ("Content is addressed by what it is").
"""

from __future__ import annotations

import functools
import hashlib
import io
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from PIL import Image, ImageSequence

from annotation.imports.icc import icc_neutral, icc_same_colours
from annotation.imports.jpeg_scan import (
    WALKED_FRAMES,
    Frame,
    ScanError,
    frame_parse,
    huffman_tables_parse,
    jpeg_scan_data,
    scan_parse,
)
from annotation.models import Media

_EXIF_ORIENTATION_TAG = 0x0112
_DEFAULT_ORIENTATION = 1
_PILLOW_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


class _Unstrippable(ValueError):
    """The container holds something the stripper does not understand."""


@dataclass(frozen=True)
class Stripped:
    data: bytes
    result: Media.StripResult
    # Why stripping failed (``result`` is FAILED) or fell back to a re-encode.
    problem: str = ""


def metadata_strip(data: bytes, *, image_format: str) -> Stripped:
    """The bytes to serve for a verified image of ``image_format`` (a ``Media.Format``)."""
    problem = ""
    for strip in _CONTAINER_STRIPPERS[image_format]:
        try:
            stripped = strip(data)
        except _Unstrippable as exc:
            problem = problem or f"cannot strip the container: {exc}"
            continue
        if stripped == data:
            return Stripped(data, Media.StripResult.UNCHANGED)
        mismatch = _mismatch(data, stripped)
        if not mismatch:
            return Stripped(stripped, Media.StripResult.STRIPPED)
        problem = problem or mismatch
    if image_format in _REENCODABLE:
        reencoded = _reencode(data)
        if reencoded is not None and not _mismatch(data, reencoded, compare_colours=True):
            return Stripped(reencoded, Media.StripResult.REENCODED, problem)
    return Stripped(data, Media.StripResult.FAILED, problem)


# --- verification -------------------------------------------------------------------------


def _mismatch(original: bytes, candidate: bytes, *, compare_colours: bool = False) -> str:
    """Empty when ``candidate`` renders like ``original``; otherwise what differs."""
    try:
        expected, expected_profile = _rendering(original, compare_colours=compare_colours)
        found, found_profile = _rendering(candidate, compare_colours=compare_colours)
    except _PILLOW_ERRORS as exc:
        return f"the stripped copy does not decode: {exc or type(exc).__name__}"
    if found != expected:
        return "the stripped copy decodes to other pixels"
    if (
        expected_profile
        and found_profile
        and expected_profile != found_profile
        and not icc_same_colours(expected_profile, found_profile)
    ):
        return "the stripped copy's colour profile gives other colours"
    return ""


def _rendering(data: bytes, *, compare_colours: bool) -> tuple[tuple, bytes | None]:
    """What a viewer shows: every frame's pixels (hashed), size, mode, palette, transparency
    and timing, the colour profile (reduced to its colours, ``icc_neutral``) and the
    orientation; and the profile as it is. A JPEG counts by its primary image only: a
    browser shows nothing else (an MPO's further views are not served).
    ``compare_colours`` compares palette images by their colours, not their palette indices,
    for a re-encode that may order the palette differently."""
    with Image.open(io.BytesIO(data)) as image:
        frames = [image] if image.format in ("JPEG", "MPO") else ImageSequence.Iterator(image)
        rendered = [_frame_rendering(frame, compare_colours=compare_colours) for frame in frames]
        profile = image.info.get("icc_profile") or None
        return (
            icc_neutral(profile),
            image.getexif().get(_EXIF_ORIENTATION_TAG, _DEFAULT_ORIENTATION),
            image.info.get("loop"),
            rendered,
        ), profile


def _frame_rendering(frame: Image.Image, *, compare_colours: bool) -> tuple:
    if compare_colours and frame.mode in ("P", "PA"):
        frame = frame.convert("RGBA")
    return (
        frame.mode,
        frame.size,
        hashlib.sha256(frame.tobytes()).digest(),
        frame.getpalette() if frame.mode in ("P", "PA") else None,
        frame.info.get("transparency"),
        frame.info.get("duration"),
    )


def _reencode(data: bytes) -> bytes | None:
    """A re-encode of a PNG or GIF with no metadata beyond its colour profile (reduced to
    its colours), or None."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            options = {
                key: image.info[key]
                for key in ("transparency", "duration", "loop")
                if key in image.info
            }
            profile = icc_neutral(image.info.get("icc_profile"))
            if profile:
                options["icc_profile"] = profile
            orientation = _orientation_tiff(image.getexif().get(_EXIF_ORIENTATION_TAG))
            if orientation and image.format == "PNG":
                options["exif"] = orientation
            out = io.BytesIO()
            image.save(out, format=image.format, save_all=True, optimize=False, **options)
    except _PILLOW_ERRORS:
        return None
    return out.getvalue()


def _orientation_exif(exif: bytes) -> bytes | None:
    """A TIFF block holding only the orientation of the EXIF block ``exif``, or None when that
    is the default (or unreadable: the verification then compares the same default)."""
    try:
        parsed = Image.Exif()
        parsed.load(exif)
        orientation = parsed.get(_EXIF_ORIENTATION_TAG)
    except (*_PILLOW_ERRORS, KeyError, TypeError):
        return None
    return _orientation_tiff(orientation)


def _orientation_tiff(orientation: object) -> bytes | None:
    """A TIFF block holding only ``orientation``, or None for the default or a wrong value."""
    if not isinstance(orientation, int) or not 2 <= orientation <= 8:
        return None
    short, one_value, no_next_ifd = 3, 1, 0
    return (
        b"MM\x00\x2a"
        + struct.pack(">IH", 8, 1)
        + struct.pack(">HHIHH", _EXIF_ORIENTATION_TAG, short, one_value, orientation, 0)
        + struct.pack(">I", no_next_ifd)
    )


# --- JPEG ---------------------------------------------------------------------------------

_JPEG_SOI, _JPEG_EOI, _JPEG_SOS, _JPEG_COM = 0xD8, 0xD9, 0xDA, 0xFE
_JPEG_DHT, _JPEG_DRI = 0xC4, 0xDD
_JPEG_APP0, _JPEG_APP1, _JPEG_APP2, _JPEG_APP15 = 0xE0, 0xE1, 0xE2, 0xEF
_JPEG_FRAMES = {*range(0xC0, 0xD0)} - {0xC4, 0xC8, 0xCC}  # SOF0-15 but DHT, JPG, DAC
_JPEG_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM and RST0-7 have no length
_JFIF_HEADER_BYTES = 14  # identifier, version, units, densities, thumbnail size
_ADOBE_HEADER_BYTES = 12  # identifier, version, flags, colour transform
_JPEG_ICC = b"ICC_PROFILE\x00"
_JPEG_ICC_CHUNK_BYTES = 65535 - 2 - len(_JPEG_ICC) - 2  # length, identifier, number, count
# The application segments a decoder needs: JFIF (rebuilt without its thumbnail), the ICC
# colour profile (rebuilt, below), and Adobe's colour transform flag. Every other APPn and COM
# is metadata.
_JPEG_KEPT_APPS = {0xE0: b"JFIF\x00", 0xEE: b"Adobe"}


@dataclass
class _JpegDecoding:
    """What the stripper learns of the frame on its way: enough to walk the scans."""

    frame: Frame | None = None
    tables: dict = field(default_factory=dict)
    restart_interval: int = 0
    walkable: bool = True


def _strip_jpeg(data: bytes, *, walk_scans: bool = True) -> bytes:
    if data[:2] != b"\xff\xd8":
        raise _Unstrippable("no JPEG start marker")
    out = [data[:2]]
    pos = 2
    icc_chunks: list[bytes] = []
    icc_at = -1
    scanned = False
    decoding = _JpegDecoding(walkable=walk_scans)
    while True:
        if pos + 2 > len(data) or data[pos] != 0xFF:
            raise _Unstrippable(f"no marker at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker == _JPEG_EOI:
            # Whatever follows the end of the image is not shown (an MPO's further views
            # carry their own EXIF): it is left out.
            out.append(data[pos : pos + 2])
            if icc_at >= 0:
                out[icc_at] = _jpeg_icc_segments(icc_chunks)
            return b"".join(out)
        if marker == _JPEG_SOI:
            raise _Unstrippable(f"a second start marker at byte {pos}")
        if marker in _JPEG_STANDALONE:
            out.append(data[pos : pos + 2])
            pos += 2
            continue
        if pos + 4 > len(data):
            raise _Unstrippable("truncated segment")
        end = pos + 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
        if end > len(data) or end < pos + 4:
            raise _Unstrippable(f"segment at byte {pos} has a wrong length")
        payload = data[pos + 4 : end]
        if marker == _JPEG_SOS:
            out.append(data[pos:end])
            scan, end = _jpeg_scan(data, end, payload, decoding)
            out.append(scan)
            scanned = True
        elif _JPEG_APP0 <= marker <= _JPEG_APP15 and scanned:
            pass  # decoders read application segments before the first scan only
        elif marker == _JPEG_APP2 and payload.startswith(_JPEG_ICC):
            if icc_at < 0:
                icc_at = len(out)
                out.append(b"")
            icc_chunks.append(payload[len(_JPEG_ICC) :])
        else:
            _jpeg_learn(marker, payload, decoding)
            out.append(_jpeg_segment_kept(marker, payload, data[pos:end]))
        pos = end


def _jpeg_learn(marker: int, payload: bytes, decoding: _JpegDecoding) -> None:
    try:
        if marker in _JPEG_FRAMES:
            decoding.frame = frame_parse(marker, payload)
        elif marker == _JPEG_DHT:
            huffman_tables_parse(payload, decoding.tables)
        elif marker == _JPEG_DRI and len(payload) >= 2:
            decoding.restart_interval = int.from_bytes(payload[:2], "big")
    except ScanError:
        decoding.walkable = False


def _jpeg_scan(
    data: bytes, start: int, header: bytes, decoding: _JpegDecoding
) -> tuple[bytes, int]:
    """A scan's entropy-coded data and where the next marker stands. For the codings a
    decoder of the web reads (Huffman, sequential or progressive) the data ends at the last
    byte a decoder reads: bytes between it and the next marker are skipped by decoders and
    left out here. A scan that cannot be walked keeps its data up to the next marker."""
    frame = decoding.frame
    if frame is not None and frame.kind in WALKED_FRAMES and decoding.walkable:
        try:
            return jpeg_scan_data(
                data,
                start,
                frame=frame,
                scan=scan_parse(header, frame),
                tables=decoding.tables,
                restart_interval=decoding.restart_interval,
                find_marker=_jpeg_next_marker,
            )
        except ScanError:
            decoding.walkable = False  # later refinement scans depend on this one
    end = _jpeg_scan_end(data, start)
    return data[start:end], end


def _jpeg_icc_segments(chunks: list[bytes]) -> bytes:
    """The ICC profile's APP2 segments, the profile reduced to its colours, or nothing when
    the chunks do not make one profile (numbered 1 to their count, each once, as decoders
    require: they then ignore them)."""
    count = len(chunks)
    if any(len(c) < 2 or c[1] != count for c in chunks):
        return b""
    if sorted(c[0] for c in chunks) != list(range(1, count + 1)):
        return b""
    profile = icc_neutral(b"".join(c[2:] for c in sorted(chunks)))
    if profile is None:
        return b""
    pieces = [
        profile[at : at + _JPEG_ICC_CHUNK_BYTES]
        for at in range(0, len(profile), _JPEG_ICC_CHUNK_BYTES)
    ]
    return b"".join(
        _jpeg_segment(_JPEG_APP2, _JPEG_ICC + bytes((n, len(pieces))) + piece)
        for n, piece in enumerate(pieces, start=1)
    )


def _jpeg_segment_kept(marker: int, payload: bytes, segment: bytes) -> bytes:
    """The bytes to keep of one segment before or between scans."""
    if marker == _JPEG_COM:
        return b""
    if not _JPEG_APP0 <= marker <= _JPEG_APP15:
        return segment  # tables, frame headers, restart intervals: needed to decode
    if marker == _JPEG_APP1 and payload.startswith(b"Exif\x00\x00"):
        orientation = _orientation_exif(payload)
        return _jpeg_segment(_JPEG_APP1, b"Exif\x00\x00" + orientation) if orientation else b""
    identifier = _JPEG_KEPT_APPS.get(marker)
    if identifier is None or not payload.startswith(identifier):
        return b""
    if marker == _JPEG_APP0:
        return _jpeg_segment(marker, payload[: _JFIF_HEADER_BYTES - 2] + b"\x00\x00")
    return _jpeg_segment(marker, payload[:_ADOBE_HEADER_BYTES])


def _jpeg_segment(marker: int, payload: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(payload) + 2) + payload


def _jpeg_scan_end(data: bytes, pos: int) -> int:
    """Where the entropy-coded data starting at ``pos`` ends: at the next marker that is not
    a stuffed byte (FF00) or a restart marker."""
    while True:
        found = data.find(b"\xff", pos)
        if found < 0 or found + 1 >= len(data):
            raise _Unstrippable("the image data has no end marker")
        following = data[found + 1]
        if following == 0xFF:
            pos = found + 1
        elif following == 0x00 or 0xD0 <= following <= 0xD7:
            pos = found + 2
        else:
            return found


def _jpeg_next_marker(data: bytes, pos: int) -> int:
    """Where the next marker (a restart marker too) starts after ``pos``: at its first fill
    byte, skipping stuffed bytes (FF00)."""
    while True:
        found = data.find(b"\xff", pos)
        if found < 0 or found + 1 >= len(data):
            raise ScanError("the image data has no end marker")
        if data[found + 1] != 0x00:
            return found
        pos = found + 2


# --- PNG ----------------------------------------------------------------------------------

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Chunks a viewer needs to render the image (cICP, like iCCP and sRGB, names its colour
# space), APNG's animation chunks included; every other ancillary chunk is dropped.
_PNG_KEPT = {
    b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"cICP",
    b"sBIT", b"pHYs", b"acTL", b"fcTL", b"fdAT",
}  # fmt: skip
_PNG_ICC_NAME = b"ICC profile"  # iCCP's profile name is free text: replaced
# Chunks of one length by the specification; decoders (libpng) ignore an ancillary one of
# another length, so it goes (a text padded after the values would otherwise be served).
_PNG_LENGTHS = {
    b"IHDR": 13, b"IEND": 0, b"gAMA": 4, b"cHRM": 32, b"sRGB": 1, b"pHYs": 9, b"cICP": 4,
    b"acTL": 8, b"fcTL": 26,
}  # fmt: skip
_PNG_SBIT_LENGTHS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}  # by colour type
_PNG_TRNS_LENGTHS = {0: 2, 2: 6}  # grey and truecolour; a palette's is at most its size
_PNG_MAX_PROFILE_BYTES = 16 * 1024 * 1024


def _strip_png(data: bytes) -> bytes:
    if not data.startswith(_PNG_SIGNATURE):
        raise _Unstrippable("no PNG signature")
    out = [_PNG_SIGNATURE]
    pos = len(_PNG_SIGNATURE)
    colour_type, palette_entries = -1, 0
    header, image_data = b"", []
    while True:
        if pos + 12 > len(data):
            raise _Unstrippable("no IEND chunk")
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise _Unstrippable(f"chunk {kind!r} is truncated")
        body = data[pos + 8 : end - 4]
        if kind == b"IHDR" and length == _PNG_LENGTHS[kind]:
            header, colour_type = body, body[9]
        elif kind == b"IDAT":
            image_data.append(body)
        elif kind == b"PLTE":
            palette_entries = length // 3
        if not _png_length_right(kind, length, colour_type, palette_entries):
            if not kind[0] & 0x20 or kind in (b"acTL", b"fcTL"):
                raise _Unstrippable(f"chunk {kind!r} of a wrong length")
        elif kind == b"iCCP":
            out.append(_png_icc_chunk(body))
        elif kind in _PNG_KEPT:
            out.append(data[pos:end])  # with its CRC as it was
        elif kind == b"eXIf":
            orientation = _orientation_exif(body)
            out.append(_png_chunk(kind, orientation) if orientation else b"")
        elif not kind[0] & 0x20:
            raise _Unstrippable(f"unknown critical chunk {kind!r}")
        if kind == b"IEND":
            _png_image_data_exact(header, image_data)
            return b"".join(out)  # bytes after IEND are not part of the image
        pos = end


# Adam7's passes: first column and row, then the steps between columns and between rows.
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))  # fmt: skip
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # by colour type


def _png_image_data_exact(header: bytes, image_data: list[bytes]) -> None:
    """Raises ``_Unstrippable`` when the IDAT chunks hold more than the image's rows: bytes
    after the zlib stream, or rows past the last, which decoders skip (the image is then
    re-encoded losslessly). The expected size is the rows' bytes, each with its filter byte,
    of every interlacing pass."""
    if len(header) != _PNG_LENGTHS[b"IHDR"] or header[9] not in _PNG_CHANNELS:
        raise _Unstrippable("no image header before the image data")
    width, height = struct.unpack(">II", header[:8])
    bits = header[8] * _PNG_CHANNELS[header[9]]
    passes = _ADAM7 if header[12] == 1 else ((0, 0, 1, 1),)
    expected = 0
    for x0, y0, dx, dy in passes:
        columns, rows = -(-(width - x0) // dx), -(-(height - y0) // dy)
        if columns > 0 and rows > 0:
            expected += rows * (1 + -(-columns * bits // 8))
    decompressor = zlib.decompressobj()
    produced = 0
    try:
        for n, chunk in enumerate(image_data):
            pending = chunk
            while pending and not decompressor.eof:
                produced += len(decompressor.decompress(pending, 1 << 20))
                if produced > expected:
                    raise _Unstrippable("the image data holds more than the image's rows")
                pending = decompressor.unconsumed_tail
            if decompressor.eof and (decompressor.unused_data or any(image_data[n + 1 :])):
                raise _Unstrippable("bytes after the image data's zlib stream")
    except zlib.error as exc:
        raise _Unstrippable(f"the image data does not decompress: {exc}") from None
    if not decompressor.eof or produced != expected:
        raise _Unstrippable("the image data's size is not the image's")


def _png_length_right(kind: bytes, length: int, colour_type: int, palette_entries: int) -> bool:
    if kind in _PNG_LENGTHS:
        return length == _PNG_LENGTHS[kind]
    if kind == b"sBIT":
        return length == _PNG_SBIT_LENGTHS.get(colour_type)
    if kind == b"tRNS":
        if colour_type == 3:
            return 0 < length <= palette_entries
        return length == _PNG_TRNS_LENGTHS.get(colour_type)
    return True


def _png_icc_chunk(body: bytes) -> bytes:
    """iCCP with a neutral name and the profile reduced to its colours (``icc_neutral``), or
    nothing when it holds no profile a decoder can read."""
    name_end = body.find(b"\x00")
    if name_end < 0 or body[name_end + 1 : name_end + 2] != b"\x00":  # 0: zlib
        return b""
    decompressor = zlib.decompressobj()
    try:
        profile = decompressor.decompress(body[name_end + 2 :], _PNG_MAX_PROFILE_BYTES)
    except zlib.error:
        return b""
    neutral = icc_neutral(profile)
    if neutral is None:
        return b""
    return _png_chunk(b"iCCP", _PNG_ICC_NAME + b"\x00\x00" + zlib.compress(neutral, 9))


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# --- WebP ---------------------------------------------------------------------------------

_WEBP_KEPT = {b"VP8X", b"ICCP", b"ANIM", b"ANMF", b"ALPH", b"VP8 ", b"VP8L"}
_WEBP_FRAME_KEPT = {b"ALPH", b"VP8 ", b"VP8L"}  # inside an animation frame
# Chunks of one length by the specification: anything after it is cut off.
_WEBP_LENGTHS = {b"VP8X": 10, b"ANIM": 6}
_WEBP_FRAME_HEADER_BYTES = 16
_VP8X_ICC_FLAG, _VP8X_EXIF_FLAG, _VP8X_XMP_FLAG = 0x20, 0x08, 0x04


def _strip_webp(data: bytes) -> bytes:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise _Unstrippable("no RIFF WEBP header")
    riff_end = 8 + int.from_bytes(data[4:8], "little")
    if riff_end > len(data):
        raise _Unstrippable("the RIFF size is larger than the file")
    chunks: list[bytes] = []
    orientation = None
    profile = False
    for fourcc, body in _riff_chunks(data, 12, riff_end):
        if fourcc == b"ICCP":
            neutral = icc_neutral(body) if not profile else None
            if neutral:
                chunks.append(_riff_chunk(fourcc, neutral))
                profile = True
        elif fourcc == b"ANMF":
            if len(body) < _WEBP_FRAME_HEADER_BYTES:
                raise _Unstrippable("animation frame too short")
            frame = _riff_chunks(body, _WEBP_FRAME_HEADER_BYTES, len(body))
            kept = [_riff_chunk(k, b) for k, b in frame if k in _WEBP_FRAME_KEPT]
            chunks.append(_riff_chunk(fourcc, body[:_WEBP_FRAME_HEADER_BYTES] + b"".join(kept)))
        elif fourcc in _WEBP_KEPT:
            if fourcc in _WEBP_LENGTHS:
                if len(body) < _WEBP_LENGTHS[fourcc]:
                    raise _Unstrippable(f"chunk {fourcc!r} too short")
                body = body[: _WEBP_LENGTHS[fourcc]]
            chunks.append(_riff_chunk(fourcc, body))
        elif fourcc == b"EXIF" and orientation is None:
            orientation = _orientation_exif(body)
            if orientation:
                chunks.append(_riff_chunk(b"EXIF", orientation))
    if chunks and chunks[0].startswith(b"VP8X"):
        flags = chunks[0][8] & ~(_VP8X_EXIF_FLAG | _VP8X_XMP_FLAG | _VP8X_ICC_FLAG)
        if orientation:
            flags |= _VP8X_EXIF_FLAG
        if profile:
            flags |= _VP8X_ICC_FLAG
        chunks[0] = chunks[0][:8] + bytes((flags,)) + chunks[0][9:]
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _riff_chunks(data: bytes, pos: int, end: int) -> list[tuple[bytes, bytes]]:
    """The (fourcc, body) of the chunks from ``pos`` to ``end``, padding left out."""
    chunks = []
    while pos < end:
        if pos + 8 > end:
            raise _Unstrippable("truncated chunk header")
        fourcc = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        if pos + 8 + size > end:
            raise _Unstrippable(f"chunk {fourcc!r} is truncated")
        chunks.append((fourcc, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size + (size & 1)
    return chunks


def _riff_chunk(fourcc: bytes, body: bytes) -> bytes:
    """A chunk with its size and a zero padding byte (whatever the original padded with)."""
    return fourcc + struct.pack("<I", len(body)) + body + bytes(len(body) & 1)


# --- GIF ----------------------------------------------------------------------------------

_GIF_EXTENSION, _GIF_IMAGE, _GIF_TRAILER = 0x21, 0x2C, 0x3B
_GIF_GRAPHIC_CONTROL = 0xF9
_GIF_APPLICATION = 0xFF
# Application extensions that carry the loop count; every other one (XMP's "XMP DataXMP"
# among them) and every comment or plain-text extension is dropped.
_GIF_LOOP_APPLICATIONS = {b"NETSCAPE2.0", b"ANIMEXTS1.0"}
_GIF_LOOP_BLOCK_BYTES = 3
_GIF_GRAPHIC_CONTROL_BYTES = 4


def _strip_gif(data: bytes) -> bytes:
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 13:
        raise _Unstrippable("no GIF header")
    pos = 13 + _gif_colour_table_bytes(data[10])
    out = [data[:pos]]
    while True:
        if pos >= len(data):
            raise _Unstrippable("no GIF trailer")
        introducer = data[pos]
        if introducer == _GIF_TRAILER:
            out.append(data[pos : pos + 1])
            return b"".join(out)  # bytes after the trailer are not part of the image
        if introducer == _GIF_IMAGE:
            if pos + 11 > len(data):
                raise _Unstrippable("truncated image descriptor")
            # Descriptor, local colour table, LZW code size, then the data sub-blocks.
            blocks = pos + 10 + _gif_colour_table_bytes(data[pos + 9]) + 1
            end = _gif_sub_blocks_end(data, blocks)
            _gif_image_data_exact(data[blocks - 1], data[blocks:end])
            out.append(data[pos:end])
        elif introducer == _GIF_EXTENSION and pos + 2 <= len(data):
            end = _gif_sub_blocks_end(data, pos + 2)
            out.append(_gif_extension_kept(data[pos + 1], data[pos + 2 : end]))
        else:
            raise _Unstrippable(f"unknown block 0x{introducer:02x} at byte {pos}")
        pos = end


_GIF_MAX_CODE_BITS = 12


def _gif_image_data_exact(code_size: int, blocks: bytes) -> None:
    """Raises ``_Unstrippable`` when bytes follow the LZW end code in the data sub-blocks:
    decoders skip them (the image is then re-encoded losslessly). Walks the codes, tracking
    only the code width (the table's size), not the pixels."""
    payload = bytearray()
    pos = 0
    while blocks[pos]:
        payload += blocks[pos + 1 : pos + 1 + blocks[pos]]
        pos += 1 + blocks[pos]
    if not 2 <= code_size <= 11:
        return
    clear, end = 1 << code_size, (1 << code_size) + 1
    width, next_code, after_clear = code_size + 1, clear + 2, True
    accumulator = bits = read = 0
    while True:
        while bits < width:
            if read >= len(payload):
                return  # no end code: decoders stop at the end of the data
            accumulator |= payload[read] << bits
            read += 1
            bits += 8
        code = accumulator & ((1 << width) - 1)
        accumulator >>= width
        bits -= width
        if code == clear:
            width, next_code, after_clear = code_size + 1, clear + 2, True
            continue
        if code == end:
            if read < len(payload):
                raise _Unstrippable("bytes after the image data's end code")
            return
        if not after_clear and next_code < 1 << _GIF_MAX_CODE_BITS:
            next_code += 1
            if next_code == 1 << width and width < _GIF_MAX_CODE_BITS:
                width += 1
        after_clear = False


def _gif_extension_kept(label: int, blocks: bytes) -> bytes:
    """An extension rebuilt with only the sub-block a viewer reads, or nothing."""
    first = blocks[1 : 1 + blocks[0]]
    if label == _GIF_GRAPHIC_CONTROL:
        if len(first) != _GIF_GRAPHIC_CONTROL_BYTES:
            raise _Unstrippable("graphic control extension of a wrong size")
        return bytes((_GIF_EXTENSION, label, len(first))) + first + b"\x00"
    if label == _GIF_APPLICATION and first in _GIF_LOOP_APPLICATIONS:
        loop = blocks[1 + len(first) :][: 1 + _GIF_LOOP_BLOCK_BYTES]
        if loop[:1] != bytes((_GIF_LOOP_BLOCK_BYTES,)):
            raise _Unstrippable(f"{first.decode()} extension without its loop count")
        return bytes((_GIF_EXTENSION, label, len(first))) + first + loop + b"\x00"
    return b""


def _gif_colour_table_bytes(packed: int) -> int:
    return 3 * (2 << (packed & 0x07)) if packed & 0x80 else 0


def _gif_sub_blocks_end(data: bytes, pos: int) -> int:
    while True:
        if pos >= len(data):
            raise _Unstrippable("truncated data sub-blocks")
        size = data[pos]
        pos += 1 + size
        if size == 0:
            return pos


# Tried in order. A JPEG whose walked scans do not decode like the original (a coding the
# walker misreads) is stripped again with its scans' data kept up to the next marker.
_CONTAINER_STRIPPERS: dict[str, tuple[Callable[[bytes], bytes], ...]] = {
    Media.Format.JPEG: (_strip_jpeg, functools.partial(_strip_jpeg, walk_scans=False)),
    Media.Format.PNG: (_strip_png,),
    Media.Format.WEBP: (_strip_webp,),
    Media.Format.GIF: (_strip_gif,),
}
# Formats whose re-encode by Pillow is lossless; a JPEG or WebP re-encode is not (lossy WebP).
_REENCODABLE = {Media.Format.PNG, Media.Format.GIF}
