"""Reading stored media for judges: data URLs for HTTP judges, cheap statistics for the
heuristic and reward-model judges. Bytes live at ``MEDIA_ROOT / Media.relative_path``.
Importable without Django set up (the reward model's trainer uses the statistics)."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from PIL import Image, ImageOps

if TYPE_CHECKING:
    from annotation.models import Media

# Pillow's own guard against decompression bombs applies; judges never see larger images.
_REENCODE = {"JPEG": ("JPEG", "image/jpeg"), "WEBP": ("WEBP", "image/webp")}


class MediaUnavailable(Exception):
    """An image part whose media row or bytes are missing or unreadable."""


def media_rows(hashes) -> dict[str, Media]:
    """The ``Media`` rows for these hashes, in one query."""
    from annotation.models import Media  # here, so the reward model imports without Django

    hashes = set(hashes)
    return Media.objects.in_bulk(hashes) if hashes else {}


def media_path(media: Media) -> Path:
    return Path(settings.MEDIA_ROOT) / media.relative_path


def image_data_url(media: Media, *, max_side: int) -> str:
    """The image as a data URL: the original bytes, or a re-encoded copy whose longest side is
    ``max_side`` when the original is larger."""
    try:
        data = media_path(media).read_bytes()
    except OSError as exc:
        raise MediaUnavailable(f"image {media.sha256[:12]} is missing ({exc.strerror})") from None
    content_type = media.content_type
    if max_side and max(media.width, media.height) > max_side:
        try:
            with Image.open(io.BytesIO(data)) as original:
                image = ImageOps.exif_transpose(original)
                image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
                pil_format, content_type = _REENCODE.get(media.format, ("PNG", "image/png"))
                if pil_format == "JPEG" and image.mode not in ("RGB", "L"):
                    image = image.convert("RGB")
                out = io.BytesIO()
                image.save(
                    out, format=pil_format, **({"quality": 90} if pil_format != "PNG" else {})
                )
                data = out.getvalue()
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise MediaUnavailable(f"image {media.sha256[:12]} is unreadable ({exc})") from None
    return f"data:{content_type};base64,{base64.b64encode(data).decode('ascii')}"


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

    try:
        with Image.open(path) as image:
            image.draft("RGB", (_THUMB * 2, _THUMB * 2))  # JPEG decodes at a reduced scale
            thumb = image.convert("RGB").resize((_THUMB, _THUMB), Image.Resampling.BILINEAR)
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise MediaUnavailable(f"image {path.name[:12]} is unreadable ({exc})") from None
    pixels = np.asarray(thumb, dtype=np.float32) / 255.0
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
        try:
            cache[sha] = image_stats(media_path(rows[sha])) if sha in rows else None
        except MediaUnavailable:
            cache[sha] = None
