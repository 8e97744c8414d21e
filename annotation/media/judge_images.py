"""Reading stored images for judges: data URLs for HTTP judges, the pixels of small
thumbnails for the statistics of the heuristic and reward-model judges. Bytes are read through
the storage layer (annotation/core/storage.py): a decoder gets a local copy (``media_file``),
removed afterwards when it came from the bucket. Every decode of an image runs in a bounded child
(``annotation.media.bounded``): an original made smaller to send it (``image_data_url``),
the thumbnails (``image_thumbnails``, many to a child), and the video and audio of
``judge_parts``; a file that hits a limit is ``MediaUnavailable`` with the reason, as an
unreadable one is."""

from __future__ import annotations

import base64
import io
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from PIL import Image, ImageOps

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    import numpy as np

    from annotation.models import Media

# Pillow's own guard against decompression bombs applies; judges never see larger images.
_REENCODE = {"JPEG": ("JPEG", "image/jpeg"), "WEBP": ("WEBP", "image/webp")}


class MediaUnavailable(Exception):
    """An image part whose media row or bytes are missing or unreadable."""


def judge_decode(func: Callable[..., Any], /, *args: Any, kind: str, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a bounded child with the limits of ``kind``; a limit hit
    raises ``MediaUnavailable`` naming it."""
    from annotation.media.bounded import BoundedError, bounded_call

    try:
        return bounded_call(func, *args, kind=kind, **kwargs)
    except BoundedError as exc:
        raise MediaUnavailable(f"{kind} could not be decoded for the judge: {exc}") from None


@contextmanager
def media_file(media: Media) -> Iterator[Path]:
    """A local path holding the original of ``media`` for the length of the ``with``
    (``storage.local_copy``); ``MediaUnavailable`` when it is missing. Opened in the caller,
    never in a bounded child: the child reads the path it is given."""
    from annotation.core import storage

    try:
        with storage.local_copy("media", media.relative_path) as path:
            yield path
    except FileNotFoundError:
        raise MediaUnavailable(f"{media.kind} {media.sha256[:12]} is missing") from None


def image_data_url(media: Media, *, max_side: int) -> str:
    """The image as a data URL: the original bytes, or a re-encoded copy whose longest side is
    ``max_side`` when the original is larger."""
    with media_file(media) as path:
        data, content_type = path.read_bytes(), media.content_type
        if max_side and max(media.width, media.height) > max_side:
            data, content_type = judge_decode(
                _smaller, path, sha256=media.sha256, media_format=media.format,
                max_side=max_side, kind="image",
            )  # fmt: skip
    return f"data:{content_type};base64,{base64.b64encode(data).decode('ascii')}"


def _smaller(path: Path, *, sha256: str, media_format: str, max_side: int) -> tuple[bytes, str]:
    """In a bounded child: the image re-encoded with its longest side ``max_side``."""
    try:
        with Image.open(path) as original:
            image = ImageOps.exif_transpose(original)
            image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
            pil_format, content_type = _REENCODE.get(media_format, ("PNG", "image/png"))
            if pil_format == "JPEG" and image.mode not in ("RGB", "L"):
                image = image.convert("RGB")
            out = io.BytesIO()
            image.save(out, format=pil_format, **({"quality": 90} if pil_format != "PNG" else {}))
            return out.getvalue(), content_type
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise MediaUnavailable(f"image {sha256[:12]} is unreadable ({exc})") from None


# Thumbnails made one after the other in a child: starting a child costs more than a small
# image's thumbnail (a training reads every image of its pairs).
THUMBNAIL_BATCH = 32


def image_thumbnails(paths: Sequence[Path], *, side: int) -> list[np.ndarray | MediaUnavailable]:
    """Each image of ``paths`` as a ``side`` x ``side`` RGB thumbnail, float32 in [0, 1], or
    the ``MediaUnavailable`` that says why it cannot be read; decoded in bounded children
    (``THUMBNAIL_BATCH`` images a child), under the image limits, the pixel count checked
    from the header first (ARBITER_MAX_IMAGE_PIXELS)."""
    from annotation.media.bounded import bounded_map

    outcomes = bounded_map(
        _thumbnail, [((path,), {"side": side}) for path in paths], kind="image",
        batch=THUMBNAIL_BATCH,
    )  # fmt: skip
    return [
        outcome
        if not isinstance(outcome, BaseException) or isinstance(outcome, MediaUnavailable)
        else MediaUnavailable(f"image {path.name[:12]} could not be decoded: {outcome}")
        for path, outcome in zip(paths, outcomes, strict=True)
    ]


def _thumbnail(path: Path, *, side: int) -> np.ndarray:
    """In a bounded child: the thumbnail of ``image_thumbnails``."""
    import numpy as np

    max_pixels = settings.ARBITER_MAX_IMAGE_PIXELS
    # Pillow's own check (raising above twice its limit) at the same limit, as imports do:
    # the child is this call's alone.
    Image.MAX_IMAGE_PIXELS = max_pixels
    bomb = f"image {path.name[:12]} is refused as a decompression bomb"
    limit = f"more than {max_pixels:,} pixels (ARBITER_MAX_IMAGE_PIXELS)"
    try:
        with Image.open(path) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise MediaUnavailable(f"{bomb}: {width}x{height} is {limit}")
            image.draft("RGB", (side * 2, side * 2))  # JPEG decodes at a reduced scale
            thumb = image.convert("RGB").resize((side, side), Image.Resampling.BILINEAR)
    except Image.DecompressionBombError:
        raise MediaUnavailable(f"{bomb}: {limit}") from None
    except (OSError, ValueError) as exc:
        raise MediaUnavailable(f"image {path.name[:12]} is unreadable ({exc})") from None
    return np.asarray(thumb, dtype=np.float32) / 255.0
