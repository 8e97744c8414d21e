"""Image bombs: a file that claims more pixels or frames than the limits, or whose metadata
inflates when decompressed, is refused from its header, before its pixels are decoded, with
the limit named, and fast."""

from __future__ import annotations

import io
import struct
import time
import zlib

import pytest
from PIL import Image

from annotation.media.services import MediaError, image_inspect, served_copy_make
from tests.annotation.imports.conftest import png_bomb

# Refused from the header: far below what decoding the claimed pixels would take.
SECONDS = 2.0


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def refused(data: bytes, match: str) -> None:
    """Both entry points refuse ``data`` with ``match`` within SECONDS each."""
    for check in (image_inspect, lambda data: served_copy_make(data=data)):
        started = time.perf_counter()
        with pytest.raises(MediaError, match=match):
            check(data)
        assert time.perf_counter() - started < SECONDS


def jpeg_claiming(width: int, height: int) -> bytes:
    jpeg = encode(Image.new("RGB", (8, 8), "red"), "JPEG")
    sof = jpeg.index(b"\xff\xc0")
    return jpeg[: sof + 5] + struct.pack(">HH", height, width) + jpeg[sof + 9 :]


def webp_claiming(width: int, height: int) -> bytes:
    """An 8 x 8 lossless WebP behind a VP8X header that claims ``width`` x ``height``."""
    webp = encode(Image.new("RGBA", (8, 8), "red"), "WEBP", lossless=True)
    size = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    body = b"WEBP" + b"VP8X" + struct.pack("<I", 10) + bytes((0x10, 0, 0, 0)) + size + webp[12:]
    return b"RIFF" + struct.pack("<I", len(body)) + body


def gif_claiming(width: int, height: int) -> bytes:
    gif = encode(Image.new("P", (8, 8)), "GIF")
    return gif[:6] + struct.pack("<HH", width, height) + gif[10:]


@pytest.mark.parametrize(
    "data",
    [png_bomb(100_000, 100_000), jpeg_claiming(65_000, 65_000), webp_claiming(16_384, 16_384),
     gif_claiming(65_535, 65_535)],
    ids=["png", "jpeg", "webp", "gif"],
)  # fmt: skip
def test_dimensions_over_the_pixel_limit_are_refused_from_the_header(data):
    refused(data, r"decompression bomb.*ARBITER_MAX_IMAGE_PIXELS")


def test_the_limit_is_the_setting(settings):
    settings.ARBITER_MAX_IMAGE_PIXELS = 10_000
    refused(
        encode(Image.new("RGB", (101, 100)), "PNG"),
        r"101x100 is 10,100 pixels, more than the limit of 10,000 \(ARBITER_MAX_IMAGE_PIXELS\)",
    )
    image_inspect(encode(Image.new("RGB", (100, 100)), "PNG"))


def frames(count: int, size: tuple[int, int] = (8, 8)) -> list[Image.Image]:
    colours = [(index * 37 % 256, index // 7 * 40, 90) for index in range(count)]
    return [Image.new("RGB", size, colour) for colour in colours]


@pytest.mark.parametrize("fmt", ["GIF", "PNG", "WEBP"])
def test_more_frames_than_the_limit_are_refused(settings, fmt):
    settings.ARBITER_MAX_IMAGE_FRAMES = 10
    first, *rest = frames(11)
    refused(
        encode(first, fmt, save_all=True, append_images=rest, duration=50, lossless=True),
        r"11 frames, more than the limit of 10 \(ARBITER_MAX_IMAGE_FRAMES\)",
    )
    first, *rest = frames(10)
    served = served_copy_make(
        data=encode(first, fmt, save_all=True, append_images=rest, duration=50, lossless=True)
    )
    assert Image.open(io.BytesIO(served.data)).n_frames == 10


def test_an_animated_png_claiming_a_billion_frames_is_refused_before_decoding():
    first, *rest = frames(2)
    apng = encode(first, "PNG", save_all=True, append_images=rest, duration=50)
    actl = apng.index(b"acTL") - 4
    claim = png_chunk(b"acTL", struct.pack(">II", 1_000_000_000, 0))
    refused(apng[:actl] + claim + apng[actl + 20 :], r"1,000,000,000 frames")


def test_every_frame_counts_towards_the_pixel_limit(settings):
    settings.ARBITER_MAX_IMAGE_PIXELS = 300_000
    first, *rest = frames(40, size=(100, 100))
    refused(
        encode(first, "GIF", save_all=True, append_images=rest, duration=50),
        r"40 frames of 100x100 are 400,000 pixels, more than the limit of 300,000",
    )


def test_a_gif_frame_that_grows_the_canvas_is_refused_before_it_is_decoded():
    """The screen is 8 x 8; the second frame's descriptor claims 60,000 x 60,000, which Pillow
    would grow the canvas to."""
    red, blue = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    gif = encode(red, "GIF", save_all=True, append_images=[blue], duration=50)
    descriptor = b"\x2c" + struct.pack("<HHHH", 0, 0, 8, 8)
    second = gif.index(descriptor, gif.index(descriptor) + 1)
    grown = gif[:second] + b"\x2c" + struct.pack("<HHHH", 0, 0, 60_000, 60_000)
    refused(grown + gif[second + 9 :], r"decompression bomb.*ARBITER_MAX_IMAGE_PIXELS")


@pytest.mark.parametrize("chunk", [b"iCCP", b"zTXt"])
def test_png_metadata_that_inflates_past_pillows_bound_is_refused(chunk):
    """100 MB of zeros, compressed to about 100 KB, in a profile or a compressed text."""
    inflating = b"bomb\x00\x00" + zlib.compress(bytes(100 * 1024 * 1024), 9)
    png = encode(Image.new("RGB", (8, 8)), "PNG")
    at = png.index(b"IDAT") - 4
    refused(png[:at] + png_chunk(chunk, inflating) + png[at:], r"corrupt image: .*too large")


def test_a_gif_of_400000_tiny_frames_is_refused_without_walking_them_all():
    """9 MB of one-pixel frames: counting stops one past the limit (walked whole: 2.3 s)."""
    screen = b"GIF89a" + bytes((1, 0, 1, 0, 0x80, 0, 0)) + b"\x00\x00\x00\xff\xff\xff"
    frame = b"\x21\xf9\x04\x00\x01\x00\x00\x00" + b"\x2c" + bytes(4) + b"\x01\x00\x01\x00\x00"
    frame += b"\x02\x02\x44\x01\x00"  # the LZW data of one pixel
    started = time.perf_counter()
    refused(screen + frame * 400_000 + b";", r"at least 1,001 frames, more than the limit of 1,000")
    assert time.perf_counter() - started < 1.0
