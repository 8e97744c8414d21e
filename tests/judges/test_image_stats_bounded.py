"""The image statistics of the heuristic and reward-model judges and of training data are
read from thumbnails decoded in bounded children, many images to a child: a decompression
bomb is refused from its header, one that gets past the pixel limit is stopped by the
child's memory limit, within the limits and without the calling process decoding anything,
and the other images of its batch keep their statistics."""

from __future__ import annotations

import io
import resource
import time

import numpy as np
import pytest
from PIL import Image

from annotation.media import bounded
from annotation.media.judge_images import MediaUnavailable, image_thumbnails
from judges.core.images import image_stats
from tests.annotation.imports.conftest import png_bomb

# A bomb is refused in a child's start and a header read (a loaded machine: generous).
SECONDS = 10.0


def _write(path, image: Image.Image, fmt: str = "PNG"):
    out = io.BytesIO()
    image.save(out, fmt)
    path.write_bytes(out.getvalue())
    return path


def _noisy(seed: int) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (48, 40, 3), dtype=np.uint8)
    return Image.fromarray(pixels, "RGB")


def _in_process(path, side: int) -> np.ndarray:
    """The thumbnail as the trainer decoded it before, in its own process."""
    with Image.open(path) as image:
        image.draft("RGB", (side * 2, side * 2))
        thumb = image.convert("RGB").resize((side, side), Image.Resampling.BILINEAR)
    return np.asarray(thumb, dtype=np.float32) / 255.0


def test_thumbnails_come_from_the_children_as_the_trainer_made_them(tmp_path):
    paths = [_write(tmp_path / f"{i}.png", _noisy(i)) for i in range(5)]
    paths.append(_write(tmp_path / "photo.jpg", _noisy(9), "JPEG"))
    thumbs = image_thumbnails(paths, side=16)
    for path, thumb in zip(paths, thumbs, strict=True):
        assert np.array_equal(thumb, _in_process(path, 16)), path.name
    assert bounded.bounded_server_pid() is not None  # decoded by the media server's children


def test_a_bomb_is_refused_from_its_header_and_its_batch_keeps_its_statistics(tmp_path):
    good = [_write(tmp_path / f"{i}.png", _noisy(i)) for i in range(3)]
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_bomb(50_000, 50_000))
    started = time.monotonic()
    *thumbs, refused = image_thumbnails([*good, bomb], side=8)
    assert time.monotonic() - started < SECONDS
    assert isinstance(refused, MediaUnavailable)
    assert "decompression bomb" in str(refused)
    assert "ARBITER_MAX_IMAGE_PIXELS" in str(refused)
    assert all(isinstance(thumb, np.ndarray) for thumb in thumbs)
    stats = image_stats([*good, bomb])
    assert stats[bomb] is None
    assert all(stats[path] is not None for path in good)


def test_a_bomb_past_the_pixel_limit_is_stopped_by_the_childs_memory_limit(tmp_path, settings):
    settings.ARBITER_MAX_IMAGE_PIXELS = 10**10  # let it through to the decoder
    settings.ARBITER_MEDIA_MEMORY_BYTES = {
        **settings.ARBITER_MEDIA_MEMORY_BYTES,
        "image": 200_000_000,
    }
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_bomb(50_000, 50_000))  # 2.5 GB of pixels once decoded
    good = _write(tmp_path / "good.png", _noisy(1))
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    refused, thumb = image_thumbnails([bomb, good], side=8)
    assert time.monotonic() - started < settings.ARBITER_MEDIA_WALL_SECONDS["image"]
    assert isinstance(refused, MediaUnavailable)
    assert "needed more than 200 MB of memory" in str(refused)
    assert isinstance(thumb, np.ndarray)
    # this process decoded nothing: its peak did not grow by the bomb's pixels
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kb < 200_000


@pytest.mark.django_db
def test_training_data_reads_a_bombs_statistics_as_unreadable(tmp_path):
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_bomb())
    assert image_stats([bomb, bomb]) == {bomb: None}
