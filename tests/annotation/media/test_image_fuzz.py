"""Fuzzing the image rebuild: valid JPEG, PNG, WebP and GIF files (still and animated), their
bytes flipped, inserted, deleted and cut. ``image_inspect`` and ``served_copy_make`` only ever
give a rebuilt PNG, which rebuilds to itself, or refuse with ``MediaError``: no other error,
and never bytes of the input."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from annotation.media.services import MediaError, image_inspect, served_copy_make

SERVED_CHUNKS = {b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND", b"acTL", b"fcTL", b"fdAT"}


def _encode(fmt: str, *, animated: bool = False, **options) -> bytes:
    frames = [
        Image.linear_gradient("L").resize((24, 16)).convert("RGB"),
        Image.radial_gradient("L").resize((24, 16)).convert("RGB"),
    ]
    out = io.BytesIO()
    if animated:
        options.update(save_all=True, append_images=frames[1:], duration=[70, 90], loop=0)
    frames[0].save(out, fmt, **options)
    return out.getvalue()


SEEDS = [
    _encode("JPEG", quality=80),
    _encode("JPEG", progressive=True, exif=b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x00"),
    _encode("PNG"),
    _encode("PNG", animated=True),
    _encode("WEBP", lossless=True),
    _encode("WEBP", animated=True, quality=70),
    _encode("GIF"),
    _encode("GIF", animated=True, comment=b"hello"),
]


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        if kind == "flip" and where < len(data):
            data[where] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[where : where + draw(st.integers(1, 16))]
        elif kind == "cut":
            del data[where:]
    return bytes(data)


def png_chunks(data: bytes) -> set[bytes]:
    kinds, pos = set(), 8
    while pos < len(data):
        kinds.add(data[pos + 4 : pos + 8])
        pos += 12 + int.from_bytes(data[pos : pos + 4], "big")
    assert pos == len(data)
    return kinds


@settings(
    max_examples=200,
    deadline=5000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_a_mutated_image_is_rebuilt_or_refused(data):
    try:
        info = image_inspect(data)
        served = served_copy_make(data=data)
    except MediaError:
        return
    assert served.data.startswith(b"\x89PNG\r\n\x1a\n")
    assert png_chunks(served.data) <= SERVED_CHUNKS
    assert (served.width, served.height) == (info.width, info.height)
    assert served_copy_make(data=served.data).data == served.data
