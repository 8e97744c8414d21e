"""Stored media for judges: their rows in one query, cheap statistics for the heuristic and
reward-model judges (the images themselves are decoded by ``annotation.media.judge_images``,
in bounded children). Importable without Django set up (the reward model imports it)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from annotation.media.judge_images import (
    THUMBNAIL_BATCH,
    MediaUnavailable,
    image_thumbnails,
    media_file,
)

if TYPE_CHECKING:
    from annotation.models import Media

Key = TypeVar("Key", bound=Hashable)
# Local copies held at once while their statistics are made (each a temporary download when
# the files live in a bucket): a few children's worth.
COPIES_AT_ONCE = 4 * THUMBNAIL_BATCH


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


def copied_image_stats(
    keys: Iterable[Key], local_copy: Callable[[Key], AbstractContextManager[Path]]
) -> dict[Key, ImageStats | None]:
    """Statistics of each image of ``keys``, each read from the local path ``local_copy(key)``
    holds for the length of a ``with`` (the storage layer's copy); None when it is missing or
    cannot be read. At most ``COPIES_AT_ONCE`` copies are held at a time."""
    keys = list(dict.fromkeys(keys))
    stats: dict[Key, ImageStats | None] = {}
    for start in range(0, len(keys), COPIES_AT_ONCE):
        with ExitStack() as copies:
            paths: dict[Key, Path] = {}
            for key in keys[start : start + COPIES_AT_ONCE]:
                try:
                    paths[key] = copies.enter_context(local_copy(key))
                except (MediaUnavailable, FileNotFoundError):
                    stats[key] = None
            measured = image_stats(paths.values())
            stats.update((key, measured[path]) for key, path in paths.items())
    return stats


def media_image_stats(rows: dict[str, Media]) -> dict[str, ImageStats | None]:
    """Statistics of the stored originals of ``rows`` (hash to ``Media``), keyed by hash."""
    return copied_image_stats(rows, lambda sha: media_file(rows[sha]))


def image_stats_cached(hashes, cache: dict[str, ImageStats | None]) -> None:
    """Fills ``cache`` with the statistics of each hash not in it yet (None: the media row or
    its bytes are missing or unreadable). Media never change, so a cache may live long."""
    wanted = {sha for sha in hashes if sha not in cache}
    stats = media_image_stats(media_rows(wanted))
    for sha in wanted:
        cache[sha] = stats.get(sha)
