"""Removes metadata (EXIF, XMP, IPTC, comments, text chunks) from an image without touching
its pixels, so a generator's name written there never reaches an annotator.

Stripping works on the container: segments, chunks and blocks that carry metadata are dropped
and the compressed image data is copied byte for byte (re-encoding a JPEG would change its
pixels). Only an EXIF orientation other than the default survives, rewritten as a TIFF block
holding nothing else, because browsers rotate by it. The result is decoded with Pillow and must
equal the original frame for frame; when container stripping cannot be done or verified, a
PNG or GIF is re-encoded (and verified again) and a JPEG or WebP keeps its original bytes.
See docs/architecture.md ("Content is addressed by what it is").
"""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from PIL import Image, ImageSequence

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
    try:
        stripped = _CONTAINER_STRIPPERS[image_format](data)
    except _Unstrippable as exc:
        problem = f"cannot strip the container: {exc}"
    else:
        if stripped == data:
            return Stripped(data, Media.StripResult.UNCHANGED)
        problem = _mismatch(data, stripped)
        if not problem:
            return Stripped(stripped, Media.StripResult.STRIPPED)
    if image_format in _REENCODABLE:
        reencoded = _reencode(data)
        if reencoded is not None and not _mismatch(data, reencoded, compare_colours=True):
            return Stripped(reencoded, Media.StripResult.REENCODED, problem)
    return Stripped(data, Media.StripResult.FAILED, problem)


# --- verification -------------------------------------------------------------------------


def _mismatch(original: bytes, candidate: bytes, *, compare_colours: bool = False) -> str:
    """Empty when ``candidate`` renders like ``original``; otherwise what differs."""
    try:
        expected = _rendering(original, compare_colours=compare_colours)
        found = _rendering(candidate, compare_colours=compare_colours)
    except _PILLOW_ERRORS as exc:
        return f"the stripped copy does not decode: {exc or type(exc).__name__}"
    return "" if found == expected else "the stripped copy decodes to other pixels"


def _rendering(data: bytes, *, compare_colours: bool) -> tuple:
    """What a viewer shows: every frame's pixels (hashed), size, mode, palette, transparency
    and timing, the colour profile and the orientation. A JPEG counts by its primary image
    only: a browser shows nothing else (an MPO's further views are not served).
    ``compare_colours`` compares palette images by their colours, not their palette indices,
    for a re-encode that may order the palette differently."""
    with Image.open(io.BytesIO(data)) as image:
        frames = [image] if image.format in ("JPEG", "MPO") else ImageSequence.Iterator(image)
        rendered = [_frame_rendering(frame, compare_colours=compare_colours) for frame in frames]
        return (
            image.info.get("icc_profile"),
            image.getexif().get(_EXIF_ORIENTATION_TAG, _DEFAULT_ORIENTATION),
            image.info.get("loop"),
            rendered,
        )


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
    """A re-encode of a PNG or GIF with no metadata beyond its colour profile, or None."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            options = {
                key: image.info[key]
                for key in ("icc_profile", "transparency", "duration", "loop")
                if key in image.info
            }
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
_JPEG_APP0, _JPEG_APP1, _JPEG_APP15 = 0xE0, 0xE1, 0xEF
_JPEG_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM and RST0-7 have no length
_JFIF_HEADER_BYTES = 14  # identifier, version, units, densities, thumbnail size
_ADOBE_HEADER_BYTES = 12  # identifier, version, flags, colour transform
# The application segments a decoder needs: JFIF (rebuilt without its thumbnail), the ICC
# colour profile, and Adobe's colour transform flag. Every other APPn and COM is metadata.
_JPEG_KEPT_APPS = {0xE0: b"JFIF\x00", 0xE2: b"ICC_PROFILE\x00", 0xEE: b"Adobe"}


def _strip_jpeg(data: bytes) -> bytes:
    if data[:2] != b"\xff\xd8":
        raise _Unstrippable("no JPEG start marker")
    out = [data[:2]]
    pos = 2
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
        if marker == _JPEG_SOS:
            end = _jpeg_scan_end(data, end)
            out.append(data[pos:end])
        else:
            out.append(_jpeg_segment_kept(marker, data[pos + 4 : end], data[pos:end]))
        pos = end


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
    if identifier == b"Adobe":
        return _jpeg_segment(marker, payload[:_ADOBE_HEADER_BYTES])
    return segment


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


# --- PNG ----------------------------------------------------------------------------------

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Chunks a viewer needs to render the image (cICP, like iCCP and sRGB, names its colour
# space), APNG's animation chunks included; every other ancillary chunk is dropped.
_PNG_KEPT = {
    b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"cICP",
    b"sBIT", b"pHYs", b"acTL", b"fcTL", b"fdAT",
}  # fmt: skip
_PNG_ICC_NAME = b"ICC profile"  # iCCP's profile name is free text: replaced


def _strip_png(data: bytes) -> bytes:
    if not data.startswith(_PNG_SIGNATURE):
        raise _Unstrippable("no PNG signature")
    out = [_PNG_SIGNATURE]
    pos = len(_PNG_SIGNATURE)
    while True:
        if pos + 12 > len(data):
            raise _Unstrippable("no IEND chunk")
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise _Unstrippable(f"chunk {kind!r} is truncated")
        body = data[pos + 8 : end - 4]
        if kind == b"iCCP":
            out.append(_png_chunk(kind, _PNG_ICC_NAME + body[body.find(b"\x00") :]))
        elif kind in _PNG_KEPT:
            out.append(data[pos:end])  # with its CRC as it was
        elif kind == b"eXIf":
            orientation = _orientation_exif(body)
            out.append(_png_chunk(kind, orientation) if orientation else b"")
        elif not kind[0] & 0x20:
            raise _Unstrippable(f"unknown critical chunk {kind!r}")
        if kind == b"IEND":
            return b"".join(out)  # bytes after IEND are not part of the image
        pos = end


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# --- WebP ---------------------------------------------------------------------------------

_WEBP_KEPT = {b"VP8X", b"ICCP", b"ANIM", b"ANMF", b"ALPH", b"VP8 ", b"VP8L"}
_VP8X_EXIF_FLAG, _VP8X_XMP_FLAG = 0x08, 0x04


def _strip_webp(data: bytes) -> bytes:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise _Unstrippable("no RIFF WEBP header")
    riff_end = 8 + int.from_bytes(data[4:8], "little")
    if riff_end > len(data):
        raise _Unstrippable("the RIFF size is larger than the file")
    chunks: list[bytes] = []
    orientation = None
    pos = 12
    while pos < riff_end:
        if pos + 8 > riff_end:
            raise _Unstrippable("truncated chunk header")
        fourcc = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        end = pos + 8 + size + (size & 1)
        if end > riff_end:
            raise _Unstrippable(f"chunk {fourcc!r} is truncated")
        if fourcc in _WEBP_KEPT:
            chunks.append(data[pos:end])
        elif fourcc == b"EXIF" and orientation is None:
            orientation = _orientation_exif(data[pos + 8 : pos + 8 + size])
            if orientation:
                chunks.append(b"EXIF" + struct.pack("<I", len(orientation)) + orientation)
        pos = end
    if chunks and chunks[0].startswith(b"VP8X"):
        flags = chunks[0][8] & ~(_VP8X_EXIF_FLAG | _VP8X_XMP_FLAG)
        if orientation:
            flags |= _VP8X_EXIF_FLAG
        chunks[0] = chunks[0][:8] + bytes((flags,)) + chunks[0][9:]
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


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
            out.append(data[pos:end])
        elif introducer == _GIF_EXTENSION and pos + 2 <= len(data):
            end = _gif_sub_blocks_end(data, pos + 2)
            out.append(_gif_extension_kept(data[pos + 1], data[pos + 2 : end]))
        else:
            raise _Unstrippable(f"unknown block 0x{introducer:02x} at byte {pos}")
        pos = end


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


_CONTAINER_STRIPPERS: dict[str, Callable[[bytes], bytes]] = {
    Media.Format.JPEG: _strip_jpeg,
    Media.Format.PNG: _strip_png,
    Media.Format.WEBP: _strip_webp,
    Media.Format.GIF: _strip_gif,
}
# Formats whose re-encode by Pillow is lossless; a JPEG or WebP re-encode is not (lossy WebP).
_REENCODABLE = {Media.Format.PNG, Media.Format.GIF}
