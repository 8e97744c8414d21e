"""Stored media for judges: their rows in one query, cheap statistics for the heuristic and
reward-model judges (the images themselves are read by ``annotation.media.judge_images``).
Importable without Django set up (the reward model's trainer uses the statistics)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotation.media.judge_images import MediaUnavailable, image_thumbnail_pixels, media_file

if TYPE_CHECKING:
    from annotation.models import Media


def media_rows(hashes) -> dict[str, Media]:
    """The ``Media`` rows for these hashes, in one query."""
    from annotation.models import Media  # here, so the reward model imports without Django

    hashes = set(hashes)
    return Media.objects.in_bulk(hashes) if hashes else {}


@dataclass(frozen=True)
class ImageStats:
    """Per-channel mean and spread and edge energy of a small thumbnail, all in [0, 1]."""

    mean_rgb: tuple[float, float, float]
    std_rgb: tuple[float, float, float]
    luminance_std: float
    edge_energy: float

    @property
    def is_blank(self) -> bool:
        """Near-uniform pixels: a solid colour or almost so."""
        return self.luminance_std < 0.01 and self.edge_energy < 0.005

    def as_features(self) -> list[float]:
        return [*self.mean_rgb, *self.std_rgb, self.luminance_std, self.edge_energy]


N_IMAGE_FEATURES = 8
_THUMB = 64


def _rgb(channels) -> tuple[float, float, float]:
    """A per-channel statistic of an RGB image as three floats."""
    red, green, blue = (float(v) for v in channels)
    return red, green, blue


def image_stats(path: Path) -> ImageStats:
    """Statistics of the image at ``path``; raises ``MediaUnavailable`` when it cannot be read."""
    import numpy as np

    pixels = image_thumbnail_pixels(path, side=_THUMB)
    luminance = pixels @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    edges = np.abs(np.diff(luminance, axis=0)).mean() + np.abs(np.diff(luminance, axis=1)).mean()
    return ImageStats(
        mean_rgb=_rgb(pixels.mean(axis=(0, 1))),
        std_rgb=_rgb(pixels.std(axis=(0, 1))),
        luminance_std=float(luminance.std()),
        edge_energy=float(edges / 2),
    )


def image_stats_cached(hashes, cache: dict[str, ImageStats | None]) -> None:
    """Fills ``cache`` with the statistics of each hash not in it yet (None: the media row or
    its bytes are missing or unreadable). Media never change, so a cache may live long."""
    wanted = {sha for sha in hashes if sha not in cache}
    rows = media_rows(wanted)
    for sha in wanted:
        if sha not in rows:
            cache[sha] = None
            continue
        try:
            with media_file(rows[sha]) as path:
                cache[sha] = image_stats(path)
        except MediaUnavailable:
            cache[sha] = None
