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
from collections.abc import Callable
from dataclasses import dataclass, field

from PIL import Image, ImageSequence

from annotation.media.icc import icc_neutral, icc_same_colours
from annotation.media.jpeg_scan import (
    WALKED_FRAMES,
    Frame,
    ScanError,
    frame_parse,
    huffman_tables_parse,
    jpeg_scan_data,
    scan_parse,
)
from annotation.media.strip_chunks import (
    DEFAULT_ORIENTATION,
    EXIF_ORIENTATION_TAG,
    PILLOW_ERRORS,
    Unstrippable,
    orientation_exif,
    orientation_tiff,
    strip_gif,
    strip_png,
    strip_webp,
)
from annotation.models import Media


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
        except Unstrippable as exc:
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


def _mismatch(original: bytes, candidate: bytes, *, compare_colours: bool = False) -> str:
    """Empty when ``candidate`` renders like ``original``; otherwise what differs."""
    try:
        expected, expected_profile = _rendering(original, compare_colours=compare_colours)
        found, found_profile = _rendering(candidate, compare_colours=compare_colours)
    except PILLOW_ERRORS as exc:
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
            image.getexif().get(EXIF_ORIENTATION_TAG, DEFAULT_ORIENTATION),
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
            orientation = orientation_tiff(image.getexif().get(EXIF_ORIENTATION_TAG))
            if orientation and image.format == "PNG":
                options["exif"] = orientation
            out = io.BytesIO()
            image.save(out, format=image.format, save_all=True, optimize=False, **options)
    except PILLOW_ERRORS:
        return None
    return out.getvalue()


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
        raise Unstrippable("no JPEG start marker")
    out = [data[:2]]
    pos = 2
    icc_chunks: list[bytes] = []
    icc_at = -1
    scanned = False
    decoding = _JpegDecoding(walkable=walk_scans)
    while True:
        if pos + 2 > len(data) or data[pos] != 0xFF:
            raise Unstrippable(f"no marker at byte {pos}")
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
            raise Unstrippable(f"a second start marker at byte {pos}")
        if marker in _JPEG_STANDALONE:
            out.append(data[pos : pos + 2])
            pos += 2
            continue
        if pos + 4 > len(data):
            raise Unstrippable("truncated segment")
        end = pos + 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
        if end > len(data) or end < pos + 4:
            raise Unstrippable(f"segment at byte {pos} has a wrong length")
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
        orientation = orientation_exif(payload)
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
            raise Unstrippable("the image data has no end marker")
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


# Tried in order. A JPEG whose walked scans do not decode like the original (a coding the
# walker misreads) is stripped again with its scans' data kept up to the next marker.
_CONTAINER_STRIPPERS: dict[str, tuple[Callable[[bytes], bytes], ...]] = {
    Media.Format.JPEG: (_strip_jpeg, functools.partial(_strip_jpeg, walk_scans=False)),
    Media.Format.PNG: (strip_png,),
    Media.Format.WEBP: (strip_webp,),
    Media.Format.GIF: (strip_gif,),
}
# Formats whose re-encode by Pillow is lossless; a JPEG or WebP re-encode is not (lossy WebP).
_REENCODABLE = {Media.Format.PNG, Media.Format.GIF}
