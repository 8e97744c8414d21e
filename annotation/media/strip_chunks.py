"""Metadata stripping for the chunked containers (``annotation.media.strip``): PNG chunks,
WebP's RIFF chunks and GIF blocks, kept or dropped by kind, image data copied byte for byte;
and the EXIF orientation rewritten as a TIFF block holding nothing else."""

from __future__ import annotations

import struct
import zlib

from PIL import Image

from annotation.media.icc import icc_neutral

EXIF_ORIENTATION_TAG = 0x0112
DEFAULT_ORIENTATION = 1
PILLOW_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


class Unstrippable(ValueError):
    """The container holds something the stripper does not understand."""


def orientation_exif(exif: bytes) -> bytes | None:
    """A TIFF block holding only the orientation of the EXIF block ``exif``, or None when that
    is the default (or unreadable: the verification then compares the same default)."""
    try:
        parsed = Image.Exif()
        parsed.load(exif)
        orientation = parsed.get(EXIF_ORIENTATION_TAG)
    except (*PILLOW_ERRORS, KeyError, TypeError):
        return None
    return orientation_tiff(orientation)


def orientation_tiff(orientation: object) -> bytes | None:
    """A TIFF block holding only ``orientation``, or None for the default or a wrong value."""
    if not isinstance(orientation, int) or not 2 <= orientation <= 8:
        return None
    short, one_value, no_next_ifd = 3, 1, 0
    return (
        b"MM\x00\x2a"
        + struct.pack(">IH", 8, 1)
        + struct.pack(">HHIHH", EXIF_ORIENTATION_TAG, short, one_value, orientation, 0)
        + struct.pack(">I", no_next_ifd)
    )


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


def strip_png(data: bytes) -> bytes:
    if not data.startswith(_PNG_SIGNATURE):
        raise Unstrippable("no PNG signature")
    out = [_PNG_SIGNATURE]
    pos = len(_PNG_SIGNATURE)
    colour_type, palette_entries = -1, 0
    header, image_data = b"", []
    while True:
        if pos + 12 > len(data):
            raise Unstrippable("no IEND chunk")
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise Unstrippable(f"chunk {kind!r} is truncated")
        body = data[pos + 8 : end - 4]
        if kind == b"IHDR" and length == _PNG_LENGTHS[kind]:
            header, colour_type = body, body[9]
        elif kind == b"IDAT":
            image_data.append(body)
        elif kind == b"PLTE":
            palette_entries = length // 3
        if not _png_length_right(kind, length, colour_type, palette_entries):
            if not kind[0] & 0x20 or kind in (b"acTL", b"fcTL"):
                raise Unstrippable(f"chunk {kind!r} of a wrong length")
        elif kind == b"iCCP":
            out.append(_png_icc_chunk(body))
        elif kind in _PNG_KEPT:
            out.append(data[pos:end])  # with its CRC as it was
        elif kind == b"eXIf":
            orientation = orientation_exif(body)
            out.append(_png_chunk(kind, orientation) if orientation else b"")
        elif not kind[0] & 0x20:
            raise Unstrippable(f"unknown critical chunk {kind!r}")
        if kind == b"IEND":
            _png_image_data_exact(header, image_data)
            return b"".join(out)  # bytes after IEND are not part of the image
        pos = end


# Adam7's passes: first column and row, then the steps between columns and between rows.
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))  # fmt: skip
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # by colour type


def _png_image_data_exact(header: bytes, image_data: list[bytes]) -> None:
    """Raises ``Unstrippable`` when the IDAT chunks hold more than the image's rows: bytes
    after the zlib stream, or rows past the last, which decoders skip (the image is then
    re-encoded losslessly). The expected size is the rows' bytes, each with its filter byte,
    of every interlacing pass."""
    if len(header) != _PNG_LENGTHS[b"IHDR"] or header[9] not in _PNG_CHANNELS:
        raise Unstrippable("no image header before the image data")
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
                    raise Unstrippable("the image data holds more than the image's rows")
                pending = decompressor.unconsumed_tail
            if decompressor.eof and (decompressor.unused_data or any(image_data[n + 1 :])):
                raise Unstrippable("bytes after the image data's zlib stream")
    except zlib.error as exc:
        raise Unstrippable(f"the image data does not decompress: {exc}") from None
    if not decompressor.eof or produced != expected:
        raise Unstrippable("the image data's size is not the image's")


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


_WEBP_KEPT = {b"VP8X", b"ICCP", b"ANIM", b"ANMF", b"ALPH", b"VP8 ", b"VP8L"}
_WEBP_FRAME_KEPT = {b"ALPH", b"VP8 ", b"VP8L"}  # inside an animation frame
# Chunks of one length by the specification: anything after it is cut off.
_WEBP_LENGTHS = {b"VP8X": 10, b"ANIM": 6}
_WEBP_FRAME_HEADER_BYTES = 16
_VP8X_ICC_FLAG, _VP8X_EXIF_FLAG, _VP8X_XMP_FLAG = 0x20, 0x08, 0x04


def strip_webp(data: bytes) -> bytes:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise Unstrippable("no RIFF WEBP header")
    riff_end = 8 + int.from_bytes(data[4:8], "little")
    if riff_end > len(data):
        raise Unstrippable("the RIFF size is larger than the file")
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
                raise Unstrippable("animation frame too short")
            frame = _riff_chunks(body, _WEBP_FRAME_HEADER_BYTES, len(body))
            kept = [_riff_chunk(k, b) for k, b in frame if k in _WEBP_FRAME_KEPT]
            chunks.append(_riff_chunk(fourcc, body[:_WEBP_FRAME_HEADER_BYTES] + b"".join(kept)))
        elif fourcc in _WEBP_KEPT:
            if fourcc in _WEBP_LENGTHS:
                if len(body) < _WEBP_LENGTHS[fourcc]:
                    raise Unstrippable(f"chunk {fourcc!r} too short")
                body = body[: _WEBP_LENGTHS[fourcc]]
            chunks.append(_riff_chunk(fourcc, body))
        elif fourcc == b"EXIF" and orientation is None:
            orientation = orientation_exif(body)
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
            raise Unstrippable("truncated chunk header")
        fourcc = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        if pos + 8 + size > end:
            raise Unstrippable(f"chunk {fourcc!r} is truncated")
        chunks.append((fourcc, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size + (size & 1)
    return chunks


def _riff_chunk(fourcc: bytes, body: bytes) -> bytes:
    """A chunk with its size and a zero padding byte (whatever the original padded with)."""
    return fourcc + struct.pack("<I", len(body)) + body + bytes(len(body) & 1)


_GIF_EXTENSION, _GIF_IMAGE, _GIF_TRAILER = 0x21, 0x2C, 0x3B
_GIF_GRAPHIC_CONTROL = 0xF9
_GIF_APPLICATION = 0xFF
# Application extensions that carry the loop count; every other one (XMP's "XMP DataXMP"
# among them) and every comment or plain-text extension is dropped.
_GIF_LOOP_APPLICATIONS = {b"NETSCAPE2.0", b"ANIMEXTS1.0"}
_GIF_LOOP_BLOCK_BYTES = 3
_GIF_GRAPHIC_CONTROL_BYTES = 4


def strip_gif(data: bytes) -> bytes:
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 13:
        raise Unstrippable("no GIF header")
    pos = 13 + _gif_colour_table_bytes(data[10])
    out = [data[:pos]]
    while True:
        if pos >= len(data):
            raise Unstrippable("no GIF trailer")
        introducer = data[pos]
        if introducer == _GIF_TRAILER:
            out.append(data[pos : pos + 1])
            return b"".join(out)  # bytes after the trailer are not part of the image
        if introducer == _GIF_IMAGE:
            if pos + 11 > len(data):
                raise Unstrippable("truncated image descriptor")
            # Descriptor, local colour table, LZW code size, then the data sub-blocks.
            blocks = pos + 10 + _gif_colour_table_bytes(data[pos + 9]) + 1
            end = _gif_sub_blocks_end(data, blocks)
            _gif_image_data_exact(data[blocks - 1], data[blocks:end])
            out.append(data[pos:end])
        elif introducer == _GIF_EXTENSION and pos + 2 <= len(data):
            end = _gif_sub_blocks_end(data, pos + 2)
            out.append(_gif_extension_kept(data[pos + 1], data[pos + 2 : end]))
        else:
            raise Unstrippable(f"unknown block 0x{introducer:02x} at byte {pos}")
        pos = end


_GIF_MAX_CODE_BITS = 12


def _gif_image_data_exact(code_size: int, blocks: bytes) -> None:
    """Raises ``Unstrippable`` when bytes follow the LZW end code in the data sub-blocks:
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
                raise Unstrippable("bytes after the image data's end code")
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
            raise Unstrippable("graphic control extension of a wrong size")
        return bytes((_GIF_EXTENSION, label, len(first))) + first + b"\x00"
    if label == _GIF_APPLICATION and first in _GIF_LOOP_APPLICATIONS:
        loop = blocks[1 + len(first) :][: 1 + _GIF_LOOP_BLOCK_BYTES]
        if loop[:1] != bytes((_GIF_LOOP_BLOCK_BYTES,)):
            raise Unstrippable(f"{first.decode()} extension without its loop count")
        return bytes((_GIF_EXTENSION, label, len(first))) + first + loop + b"\x00"
    return b""


def _gif_colour_table_bytes(packed: int) -> int:
    return 3 * (2 << (packed & 0x07)) if packed & 0x80 else 0


def _gif_sub_blocks_end(data: bytes, pos: int) -> int:
    while True:
        if pos >= len(data):
            raise Unstrippable("truncated data sub-blocks")
        size = data[pos]
        pos += 1 + size
        if size == 0:
            return pos
