"""ICC colour profiles reduced to their colour: what a served copy carries instead of the
original's profile (docs/architecture.md, "served copy").

A profile holds free text besides its colours: a description, a copyright, device and
manufacturer descriptions, and header fields naming the tool that made it; some generators
write their name there. ``icc_neutral`` rebuilds the profile from scratch: a new header keeping
only what a colour engine reads (version, class, colour spaces, illuminant, intent, the
defined flags and attributes), the tags that define colours (matrices, curves, lookup tables,
white and black points, chromatic adaptation, chromaticities, luminance, cICP) copied with
their numbers unchanged, and a neutral description and an empty copyright, which the ICC
specification requires. The colours a decoder computes are the same, which
``icc_same_colours`` checks with LittleCMS; nothing else of the original's bytes is kept.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import struct

from PIL import Image, ImageCms

ICC_DESCRIPTION = "ICC profile"
_HEADER_BYTES = 128
_TAG_ENTRY_BYTES = 12
# Tags a colour engine uses to turn the image's values into colours; every other tag (text,
# names of colorants, device and viewing descriptions, calibration dates, vendor tags) goes.
_COLOUR_TAGS = frozenset(
    {
        *(b"A2B%d" % n for n in range(3)),
        *(b"B2A%d" % n for n in range(3)),
        *(b"D2B%d" % n for n in range(4)),
        *(b"B2D%d" % n for n in range(4)),
        b"rXYZ", b"gXYZ", b"bXYZ", b"rTRC", b"gTRC", b"bTRC", b"kTRC",
        b"wtpt", b"bkpt", b"chad", b"chrm", b"lumi", b"cicp",
    }
)  # fmt: skip
# Parametric curve types and their parameter counts (ICC.1:2010, 10.18).
_PARA_PARAMETERS = {0: 1, 1: 3, 2: 4, 3: 5, 4: 7}
# A fixed date (2000-01-01 00:00:00): the creation date says when and so by what it was made.
_NEUTRAL_DATE = struct.pack(">6H", 2000, 1, 1, 0, 0, 0)
_MAX_PROFILE_BYTES = 16 * 1024 * 1024


def icc_neutral(profile: bytes | None) -> bytes | None:
    """The profile reduced to its colour tags with a neutral header and text, or None when
    it is not a profile a decoder can read (decoders then show the image as untagged)."""
    if not profile or len(profile) < _HEADER_BYTES + 4 or len(profile) > _MAX_PROFILE_BYTES:
        return None
    size = int.from_bytes(profile[0:4], "big")
    if not _HEADER_BYTES + 4 <= size <= len(profile) or profile[36:40] != b"acsp":
        return None
    count = int.from_bytes(profile[128:132], "big")
    if count > (size - _HEADER_BYTES - 4) // _TAG_ENTRY_BYTES:
        return None
    kept: list[tuple[bytes, bytes]] = []
    for n in range(count):
        entry = 132 + n * _TAG_ENTRY_BYTES
        signature = profile[entry : entry + 4]
        offset, length = struct.unpack(">II", profile[entry + 4 : entry + 12])
        if offset < 132 + count * _TAG_ENTRY_BYTES or offset + length > size or length < 8:
            return None
        if signature in _COLOUR_TAGS and signature not in dict(kept):
            data = _tag_data(profile[offset : offset + length])
            if data is None:
                return None
            kept.append((signature, data))
    major_version = profile[8]
    kept.append((b"desc", _text_tag(ICC_DESCRIPTION, major_version, description=True)))
    kept.append((b"cprt", _text_tag("", major_version, description=False)))
    return _assemble(profile, kept)


def _tag_data(data: bytes) -> bytes | None:
    """A tag's data with its reserved bytes zeroed and, for the types whose length follows
    from their content, nothing after that content; None when it is too short for it."""
    kind = data[:4]
    length = len(data)
    if kind == b"XYZ ":
        length = 8 + (len(data) - 8) // 12 * 12
    elif kind == b"sf32":
        length = 8 + (len(data) - 8) // 4 * 4
    elif kind == b"curv" and len(data) >= 12:
        length = 12 + 2 * int.from_bytes(data[8:12], "big")
    elif kind == b"para" and len(data) >= 12:
        parameters = _PARA_PARAMETERS.get(int.from_bytes(data[8:10], "big"))
        if parameters is None:
            return None
        length = 12 + 4 * parameters
    elif kind == b"chrm" and len(data) >= 12:
        length = 12 + 8 * int.from_bytes(data[8:10], "big")
    elif kind == b"cicp":
        length = 12
    if length > len(data):
        return None
    return kind + bytes(4) + data[8:length]


def _text_tag(text: str, major_version: int, *, description: bool) -> bytes:
    if major_version >= 4:  # multiLocalizedUnicodeType, one record in en-US
        encoded = text.encode("utf-16-be")
        record = struct.pack(">II2s2sII", 1, 12, b"en", b"US", len(encoded), 28)
        return b"mluc" + bytes(4) + record + encoded
    ascii_text = text.encode("ascii") + b"\x00"
    if not description:  # textType
        return b"text" + bytes(4) + ascii_text
    # textDescriptionType: ASCII, then empty Unicode and ScriptCode descriptions.
    empty_unicode_and_script_code = bytes(4 + 4 + 2 + 1 + 67)
    length = struct.pack(">I", len(ascii_text))
    return b"desc" + bytes(4) + length + ascii_text + empty_unicode_and_script_code


def _assemble(original: bytes, tags: list[tuple[bytes, bytes]]) -> bytes:
    base = _HEADER_BYTES + 4 + len(tags) * _TAG_ENTRY_BYTES  # a multiple of 4
    table = [struct.pack(">I", len(tags))]
    area = bytearray()
    placed: dict[bytes, int] = {}  # tags sharing their data (rTRC = gTRC = bTRC) still share
    for signature, data in tags:
        if data not in placed:
            area += bytes(-len(area) % 4)
            placed[data] = base + len(area)
            area += data
        table.append(signature + struct.pack(">II", placed[data], len(data)))
    area += bytes(-len(area) % 4)
    body = b"".join(table) + bytes(area)
    header = bytearray(_HEADER_BYTES)
    header[0:4] = struct.pack(">I", _HEADER_BYTES + len(body))
    header[8:24] = original[8:24]  # version, device class, colour space, connection space
    header[24:36] = _NEUTRAL_DATE
    header[36:40] = b"acsp"
    flags = int.from_bytes(original[44:48], "big") & 0x3  # embedded, used independently
    header[44:48] = struct.pack(">I", flags)
    attributes = int.from_bytes(original[56:64], "big") & 0xF  # the four defined bits
    header[56:64] = struct.pack(">Q", attributes)
    header[64:68] = struct.pack(">I", int.from_bytes(original[64:68], "big") & 0xFFFF)
    header[68:80] = original[68:80]  # the connection space's illuminant
    profile = bytes(header) + body
    if original[8] >= 4:  # the profile id: MD5 with flags, intent and id zeroed
        zeroed = bytearray(profile)
        zeroed[44:48] = zeroed[64:68] = bytes(4)
        header[84:100] = hashlib.md5(zeroed, usedforsecurity=False).digest()
        profile = bytes(header) + body
    return profile


# --- verification -------------------------------------------------------------------------

_GRID_MODES = {b"RGB ": "RGB", b"GRAY": "L", b"CMYK": "CMYK"}


def icc_same_colours(original: bytes, neutral: bytes) -> bool:
    """Whether LittleCMS turns a grid of values into the same sRGB colours through both
    profiles (true as well when it cannot read the original: no decoder then uses it)."""
    mode = _GRID_MODES.get(original[16:20])
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(original))
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return True
    if mode is None:
        return neutral[16:20] == original[16:20]
    try:
        served = ImageCms.ImageCmsProfile(io.BytesIO(neutral))
        srgb = ImageCms.createProfile("sRGB")
        grid = _grid(mode)
        return _to_srgb(grid, source, srgb) == _to_srgb(grid, served, srgb)
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return False


def _grid(mode: str) -> Image.Image:
    """Every combination of evenly spaced values of ``mode``'s channels, one pixel each."""
    steps = {"RGB": range(0, 256, 17), "L": range(256), "CMYK": range(0, 256, 51)}[mode]
    values = [bytes(combination) for combination in itertools.product(steps, repeat=len(mode))]
    return Image.frombytes(mode, (len(values), 1), b"".join(values))


def _to_srgb(
    grid: Image.Image, profile: ImageCms.ImageCmsProfile, srgb: ImageCms.core.CmsProfile
) -> bytes:
    transform = ImageCms.buildTransform(profile, srgb, grid.mode, "RGB")
    converted = ImageCms.applyTransform(grid, transform)
    assert converted is not None
    return converted.tobytes()
