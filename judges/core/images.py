"""Stored media for judges: their rows in one query, cheap statistics for the heuristic and
reward-model judges (the images themselves are decoded by ``annotation.media.judge_images``,
in bounded children). Importable without Django set up (the reward model imports it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotation.media.judge_images import MediaUnavailable, image_thumbnails, media_path

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


def image_stats(paths: Iterable[Path]) -> dict[Path, ImageStats | None]:
    """Statistics of each image of ``paths`` (None: it cannot be read), their thumbnails
    decoded many to a bounded child."""
    import numpy as np

    paths = list(dict.fromkeys(paths))
    weights = np.array([0.299, 0.587, 0.114], dtype=np.float32)
    stats: dict[Path, ImageStats | None] = {}
    for path, pixels in zip(paths, image_thumbnails(paths, side=_THUMB), strict=True):
        if isinstance(pixels, MediaUnavailable):
            stats[path] = None
            continue
        luminance = pixels @ weights
        edges = (
            np.abs(np.diff(luminance, axis=0)).mean() + np.abs(np.diff(luminance, axis=1)).mean()
        )
        stats[path] = ImageStats(
            mean_rgb=_rgb(pixels.mean(axis=(0, 1))),
            std_rgb=_rgb(pixels.std(axis=(0, 1))),
            luminance_std=float(luminance.std()),
            edge_energy=float(edges / 2),
        )
    return stats


def image_stats_cached(hashes, cache: dict[str, ImageStats | None]) -> None:
    """Fills ``cache`` with the statistics of each hash not in it yet (None: the media row or
    its bytes are missing or unreadable). Media never change, so a cache may live long."""
    wanted = {sha for sha in hashes if sha not in cache}
    rows = media_rows(wanted)
    paths = {sha: media_path(rows[sha]) for sha in wanted if sha in rows}
    stats = image_stats(paths.values())
    for sha in wanted:
        cache[sha] = stats[paths[sha]] if sha in paths else None
