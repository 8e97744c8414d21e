"""Building blocks for judge backend tests: stored images and judge items."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from django.conf import settings
from PIL import Image

from annotation.core.content import image_part, text_part
from annotation.models import Media
from judges.backends.base import JudgeItem


def store_image(image: Image.Image, fmt: str = "PNG") -> Media:
    """Saves ``image`` under MEDIA_ROOT as the media store does and returns its row."""
    out = io.BytesIO()
    image.save(out, format=fmt)
    data = out.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    media, _ = Media.objects.get_or_create(
        sha256=sha,
        defaults={
            "format": fmt,
            "width": image.width,
            "height": image.height,
            "size_bytes": len(data),
        },
    )
    path = Path(settings.MEDIA_ROOT) / media.relative_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return media


def noisy_image(width: int, height: int, seed: int = 0) -> Image.Image:
    """An image with real content (random pixels), so it is not blank."""
    import numpy as np

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels, "RGB")


def item(
    first: str | list[dict] = "Answer one",
    second: str | list[dict] = "Answer two",
    *,
    order: str = "AB",
    pair_id: int = 1,
    task: str = "text",
    prompt: str | list[dict] = "Which is better?",
    allow_tie: bool = False,
    criterion: str = "",
    metadata: dict | None = None,
) -> JudgeItem:
    """A judge item; strings become one text part."""

    def parts(value):
        return [text_part(value)] if isinstance(value, str) else value

    return JudgeItem(
        pair_id=pair_id,
        order=order,
        task=task,
        prompt=parts(prompt),
        first=parts(first),
        second=parts(second),
        criterion=criterion,
        allow_tie=allow_tie,
        metadata=metadata or {},
    )


__all__ = ["image_part", "item", "noisy_image", "store_image", "text_part"]
