"""The served copy of an image, written anew from its decoded pixels: a PNG (an animated PNG
for an animation) that holds the pixels and nothing else.

A generator may write its name anywhere a file has room: EXIF, XMP, IPTC, comments, text
chunks, a colour profile's description, application segments, padding, bytes a decoder skips.
Stripping a container is a blocklist and can never be complete, so the served copy is built
from an allowlist instead: the pixels of the frames a browser shows, each frame's duration and
the loop count. The EXIF orientation is applied to the pixels and an embedded colour profile
converted to sRGB with LittleCMS (``ImageCms``); neither is kept. A file that cannot be decoded
whole is refused (``MediaError``), never served as it came.

Sizes come first: ``image_decode`` checks the pixel count, the frame count and every frame's
pixels together against the limits from the header, before a pixel is decoded. The rebuild is
deterministic and idempotent: rebuilding a served copy gives the same bytes.
"""

from __future__ import annotations

import io
import struct
import warnings
from dataclasses import dataclass
from typing import cast

from django.conf import settings
from PIL import GifImagePlugin, Image, ImageCms, UnidentifiedImageError

ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP", "GIF")
SERVED_FORMAT = "PNG"
# Pillow names some JPEG files by their extension standard; the bytes are still JPEG.
_FORMAT_ALIASES = {"MPO": "JPEG"}
# zlib's level for the served PNGs: 6, its default, measured against 1 and 9 in
# docs/import-format.md ("What a served image keeps").
_COMPRESS_LEVEL = 6
_EXIF_ORIENTATION = 0x0112
# What each EXIF orientation asks a viewer to do (the table of ``ImageOps.exif_transpose``).
_ORIENTATIONS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))
# Pillow's own bomb check guards the allocations it makes before a caller can look (a GIF
# frame may grow the canvas while seeking): it is set to ARBITER_MAX_IMAGE_PIXELS on every
# decode and raises above twice that, which bounds them; between once and twice, the refusal
# is ours to give, with the limit named, so its warning is left out.
warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
# What Pillow raises for a file it cannot read whole.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error, TypeError)


class MediaError(Exception):
    """The file was refused; the message says why."""


@dataclass(frozen=True)
class DecodedImage:
    """An image's frames as a browser shows them, ready to be written: same mode, same size,
    no metadata; ``durations`` (ms, one a frame) and ``plays`` (0: forever) are written for an
    animation only."""

    source_format: str
    frames: list[Image.Image]
    durations: list[float]
    plays: int

    @property
    def width(self) -> int:
        return self.frames[0].width

    @property
    def height(self) -> int:
        return self.frames[0].height


def image_decode(data: bytes) -> DecodedImage:
    """Checks ``data`` from its header against ARBITER_MAX_IMAGE_PIXELS and
    ARBITER_MAX_IMAGE_FRAMES, then decodes the frames a browser shows, oriented and in sRGB.
    Raises ``MediaError`` for anything else than a whole JPEG, PNG, WebP or GIF within them."""
    max_pixels = settings.ARBITER_MAX_IMAGE_PIXELS
    # Pillow's limit is a global: set for this decoding only, so that nothing else in the
    # process (a GLB's textures, a test) decodes under the limit of the last image's settings.
    previous, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, max_pixels
    try:
        with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as image:
            return _decoded(image, max_pixels=max_pixels)
    except MediaError:
        raise
    except Image.DecompressionBombError as exc:
        raise MediaError(
            f"refused as a decompression bomb: more than the limit of {max_pixels:,} pixels "
            f"(ARBITER_MAX_IMAGE_PIXELS): {exc}"
        ) from None
    except UnidentifiedImageError:
        raise MediaError(
            "not an image Arbiter accepts (JPEG, PNG, WebP or GIF): Pillow cannot read it"
        ) from None
    except MemoryError:
        raise MediaError("refused: decoding it needs more memory than there is") from None
    except _DECODE_ERRORS as exc:
        raise MediaError(f"corrupt image: {exc or type(exc).__name__}") from None
    finally:
        Image.MAX_IMAGE_PIXELS = previous


def image_encode(decoded: DecodedImage) -> bytes:
    """The PNG (animated PNG for several frames) of ``decoded``'s pixels, with no chunk but
    those the pixels need."""
    first, *rest = decoded.frames
    out = io.BytesIO()
    try:
        if rest:
            first.save(
                out,
                SERVED_FORMAT,
                compress_level=_COMPRESS_LEVEL,
                save_all=True,
                append_images=rest,
                duration=decoded.durations,
                loop=decoded.plays,
                disposal=0,  # each frame is the whole canvas: nothing to dispose of
                blend=0,
                default_image=False,
            )
        else:
            first.save(out, SERVED_FORMAT, compress_level=_COMPRESS_LEVEL)
    except ValueError as exc:  # a frame shown longer than an animated PNG can say
        raise MediaError(f"cannot be written as an animated PNG: {exc}") from None
    return out.getvalue()


def _decoded(image: Image.Image, *, max_pixels: int) -> DecodedImage:
    # Image.open names the format of the plugin that read the file.
    opened = cast(str, image.format)
    source_format = _FORMAT_ALIASES.get(opened, opened)
    if source_format not in ACCEPTED_FORMATS:
        raise MediaError(f"unsupported image format {source_format}")
    width, height = image.size
    if width <= 0 or height <= 0:
        raise MediaError(f"unsupported image size {width}x{height}")
    _check_pixels(width, height, max_pixels)
    max_frames = settings.ARBITER_MAX_IMAGE_FRAMES
    shown = _shown_frames(image, source_format, max_frames=max_frames)
    if len(shown) > max_frames:
        # A GIF's frames are counted no further than one past the limit.
        at_least = "at least " if source_format == "GIF" else ""
        raise MediaError(
            f"refused: {at_least}{len(shown):,} frames, more than the limit of {max_frames:,} "
            "(ARBITER_MAX_IMAGE_FRAMES)"
        )
    if len(shown) * width * height > max_pixels:
        raise MediaError(
            f"refused as a decompression bomb: {len(shown):,} frames of {width}x{height} are "
            f"{len(shown) * width * height:,} pixels, more than the limit of {max_pixels:,} "
            "(ARBITER_MAX_IMAGE_PIXELS)"
        )
    animated = len(shown) > 1
    frames: list[Image.Image] = []
    durations: list[float] = []
    orientation: Image.Transpose | None = None
    profile: bytes | None = image.info.get("icc_profile") or None
    for index in shown:
        image.seek(index)
        # A GIF frame may grow the canvas: checked again before its pixels are decoded.
        _check_pixels(*image.size, max_pixels)
        if image.size != (width, height):
            raise MediaError(
                f"corrupt image: frame {index} reaches outside the {width}x{height} canvas"
            )
        image.load()
        if not frames:
            # An eXIf chunk after the pixels is read with them.
            orientation = _orientation(image.info.get("exif"))
        durations.append(float(image.info.get("duration") or 0))
        frame = _pixels(image, profile=profile, animated=animated)
        if orientation is not None:
            frame = frame.transpose(orientation)
        frame.info = {}
        frames.append(frame)
    return DecodedImage(source_format, frames, durations, _plays(image, source_format))


def _check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise MediaError(
            f"refused as a decompression bomb: {width}x{height} is {width * height:,} pixels, "
            f"more than the limit of {max_pixels:,} (ARBITER_MAX_IMAGE_PIXELS)"
        )


def _shown_frames(image: Image.Image, source_format: str, *, max_frames: int) -> range:
    """The frames a browser shows: a JPEG's primary image (an MPO's other views are not
    shown), an animated PNG's frames without a default image that is not one of them; a GIF's
    counted up to ``max_frames + 1``."""
    if source_format == "JPEG":
        return range(1)
    if source_format == "GIF":
        return range(_gif_frames(cast(GifImagePlugin.GifImageFile, image), stop=max_frames + 1))
    # The count comes from the header (acTL, the WebP demuxer).
    count = getattr(image, "n_frames", 1)
    if source_format == "PNG" and count > 1 and image.info.get("default_image"):
        return range(1, count)
    return range(count)


def _gif_frames(image: GifImagePlugin.GifImageFile, *, stop: int) -> int:
    """A GIF's frame count, or ``stop`` if it has as many: Pillow's walk over the blocks that
    decodes nothing (``n_frames``), stopped there, as a file of tiny frames takes seconds to
    walk whole (400,000 frames in 9 MB: 2.3 s)."""
    count = 1
    try:
        while count < stop:
            image._seek(count, False)  # the step of n_frames: blocks skipped, nothing decoded
            count += 1
    except EOFError:
        pass
    image.seek(0)
    return count


def _orientation(exif: bytes | None) -> Image.Transpose | None:
    """The turn an EXIF orientation asks for; none for an EXIF block a browser cannot read
    either. Only EXIF counts: browsers read no orientation from XMP."""
    if not exif:
        return None
    try:
        parsed = Image.Exif()
        parsed.load(exif)
        value = parsed.get(_EXIF_ORIENTATION)
    except Exception:  # Pillow's EXIF reader raises anything on a hostile block
        return None
    return _ORIENTATIONS.get(value) if isinstance(value, int) else None


def _plays(image: Image.Image, source_format: str) -> int:
    """How many times the animation plays (0: forever), as an animated PNG says it. A GIF
    without a loop extension plays once, and its count is of repeats after the first play."""
    loop = image.info.get("loop")
    if source_format == "GIF":
        return 1 if loop is None else 0 if loop == 0 else loop + 1
    return loop if isinstance(loop, int) and loop >= 0 else 0


def _pixels(image: Image.Image, *, profile: bytes | None, animated: bool) -> Image.Image:
    """The current frame's pixels in a mode PNG holds, in sRGB: every frame of an animation
    RGBA; a still 1-bit, 8-bit or 16-bit grey image as it is (with its alpha), anything else
    RGB or RGBA."""
    mode = image.mode
    if mode in ("P", "PA", "RGBa", "La"):
        alpha = mode != "P" or image.has_transparency_data
        frame = image.convert("RGBA" if alpha else "RGB")
    elif mode in ("1", "L", "LA", "I;16", "RGB", "RGBA", "CMYK"):
        frame = image.copy()
    elif mode in ("RGBX", "YCbCr", "LAB", "HSV"):
        frame = image.convert("RGB")
    else:
        raise MediaError(f"unsupported pixel format {mode}")
    if profile is not None and frame.mode in ("L", "LA", "RGB", "RGBA", "CMYK"):
        frame = _to_srgb(frame, profile)
    if frame.mode == "CMYK":  # no profile, or one LittleCMS cannot apply
        frame = frame.convert("RGB")
    if animated and frame.mode != "RGBA":
        frame = frame.convert("RGBA")
    return frame


def _to_srgb(frame: Image.Image, profile: bytes) -> Image.Image:
    """``frame`` converted from its embedded profile to sRGB, its alpha kept. A profile that
    cannot be read or does not fit the pixels is ignored, as browsers ignore it."""
    alpha = frame.getchannel("A") if frame.mode in ("LA", "RGBA") else None
    colour = frame.convert(frame.mode[:-1]) if alpha is not None else frame
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
        converted = ImageCms.profileToProfile(
            colour,
            source,
            _SRGB,
            renderingIntent=ImageCms.Intent(ImageCms.getDefaultIntent(source)),
            outputMode="RGB",
        )
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return frame
    if converted is None:  # only when converting in place, which this does not ask for
        return frame
    if alpha is not None:
        converted.putalpha(alpha)
    return converted
