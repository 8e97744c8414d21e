"""Images verified with Pillow and kept byte for byte, once per sha256, at
``MEDIA_ROOT/Media.relative_path``; beside each one, under its own sha256, the copy without
metadata that the app serves (``annotation.media.strip``). An import reads and stages its
media through ``annotation.imports.media``; ``media_strip_metadata`` and ``media_render_views``
make the served copy and a 3D model's views of media imported before either was made at import,
each in a bounded child process (``annotation.media.bounded``), as an import does.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from django.conf import settings
from django.db import transaction
from PIL import Image, UnidentifiedImageError

from annotation.media.bounded import bounded_call
from annotation.media.glb import glb_inspect
from annotation.media.glb_render import glb_render_views
from annotation.media.strip import metadata_strip
from annotation.models import Media, ProjectMedia

logger = logging.getLogger(__name__)

ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP", "GIF")
# Pillow names some JPEG files by their extension standard; the bytes are still JPEG.
_FORMAT_ALIASES = {"MPO": "JPEG"}


class MediaError(Exception):
    """The image was refused; the message says why."""


@dataclass(frozen=True)
class ImageInfo:
    sha256: str
    format: str
    width: int
    height: int
    size_bytes: int
    # Set once the served copy is made (an import's ``MediaStore.resolve``).
    served_sha256: str | None = None
    strip_result: Media.StripResult | None = None


def image_inspect(data: bytes) -> ImageInfo:
    """Opens and fully decodes ``data`` with Pillow; refuses non-images, other formats,
    decompression bombs (more than ARBITER_MAX_IMAGE_PIXELS pixels) and corrupt files."""
    max_pixels = settings.ARBITER_MAX_IMAGE_PIXELS
    try:
        with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as image:
            # Image.open names the format of the plugin that read the file (only images made
            # in memory have none).
            opened_format = cast(str, image.format)
            image_format = _FORMAT_ALIASES.get(opened_format, opened_format)
            width, height = image.size
            # Checked before decoding anything: the header alone names the pixel count.
            if width * height > max_pixels:
                raise MediaError(_bomb_message(width, height, max_pixels))
            image.verify()
        with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as image:
            image.load()
    except MediaError:
        raise
    except Image.DecompressionBombError as exc:
        raise MediaError(f"refused as a decompression bomb: {exc}") from None
    except UnidentifiedImageError:
        raise MediaError(
            "not an image Arbiter accepts (JPEG, PNG, WebP or GIF): Pillow cannot read it"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error) as exc:
        raise MediaError(f"corrupt image: {exc or type(exc).__name__}") from None
    if image_format not in ACCEPTED_FORMATS or width <= 0 or height <= 0:
        raise MediaError(f"unsupported image ({image_format}, {width}x{height})")
    return ImageInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        format=image_format,
        width=width,
        height=height,
        size_bytes=len(data),
    )


def _bomb_message(width: int, height: int, limit: int) -> str:
    return (
        f"refused as a decompression bomb: {width}x{height} is {width * height:,} pixels, "
        f"more than the limit of {limit:,}"
    )


@dataclass(frozen=True)
class ServedCopy:
    sha256: str
    result: Media.StripResult
    data: bytes


def served_copy_make(*, sha256: str, image_format: str, data: bytes) -> ServedCopy:
    """The copy of a verified image that the app serves: its bytes without metadata. Logs a
    warning when the metadata could not be removed (the copy is then the original)."""
    stripped = metadata_strip(data, image_format=image_format)
    if stripped.result == Media.StripResult.FAILED:
        logger.warning(
            "image %s (%s): metadata not stripped, its original bytes are served: %s",
            sha256,
            image_format,
            stripped.problem,
        )
    served_sha256 = sha256 if stripped.data == data else hashlib.sha256(stripped.data).hexdigest()
    return ServedCopy(sha256=served_sha256, result=stripped.result, data=stripped.data)


def served_copy_of_file(path: Path, *, sha256: str, image_format: str) -> ServedCopy:
    """In a bounded child: ``served_copy_make`` of the stored image at ``path``."""
    return served_copy_make(sha256=sha256, image_format=image_format, data=path.read_bytes())


def rendered_views_of_file(path: Path) -> list[tuple[ImageInfo, bytes]]:
    """In a bounded child: the views of the stored GLB model at ``path``, each PNG image with
    its ``ImageInfo``."""
    return [(image_inspect(png), png) for png in glb_render_views(glb_inspect(path.read_bytes()))]


def media_strip_metadata(*, media: Media, remake: bool = False) -> None:
    """Makes and stores the served copy of ``media``, imported before served copies existed
    (or, with ``remake``, made by an earlier stripper), and records it on the row. Raises
    ``FileNotFoundError`` when the original is missing. Two calls at once for one image write
    the same file and the same values."""
    original = Path(settings.MEDIA_ROOT) / media.relative_path
    if not original.is_file():
        raise FileNotFoundError(f"the original of image {media.sha256} is missing: {original}")
    served = bounded_call(
        served_copy_of_file, original, sha256=media.sha256, image_format=media.format,
        kind="image",
    )  # fmt: skip
    _store(served.sha256, media.format, served.data)
    rows = Media.objects.filter(pk=media.pk)
    if not remake:
        rows = rows.filter(served_sha256__isnull=True)
    rows.update(served_sha256=served.sha256, strip_result=served.result)
    media.served_sha256, media.strip_result = served.sha256, served.result


def media_render_views(*, media: Media) -> list[str]:
    """Renders the views of a 3D model imported before views were rendered at import, stores
    them as image media linked to every project that uses the model, and records them on its
    row; returns their hashes. Raises ``GlbError`` for a model that cannot be rendered,
    ``BoundedError`` when rendering it hits a limit and ``FileNotFoundError`` when its
    original is missing."""
    original = Path(settings.MEDIA_ROOT) / media.relative_path
    if not original.is_file():
        raise FileNotFoundError(f"the original of model {media.sha256} is missing: {original}")
    rendered = bounded_call(rendered_views_of_file, original, kind="model3d")
    views = [view for view, _ in rendered]
    for view, png in rendered:
        _store(view.sha256, view.format, png)
    hashes = [view.sha256 for view in views]
    with transaction.atomic():
        Media.objects.bulk_create(
            [
                Media(sha256=view.sha256, kind=Media.Kind.IMAGE, format=view.format,
                      width=view.width, height=view.height, size_bytes=view.size_bytes,
                      served_sha256=view.sha256, strip_result=Media.StripResult.UNCHANGED)
                for view in views
            ],
            ignore_conflicts=True,
        )  # fmt: skip
        projects = ProjectMedia.objects.filter(media=media).values_list("project_id", flat=True)
        ProjectMedia.objects.bulk_create(
            [
                ProjectMedia(project_id=project, media_id=sha)
                for project in projects
                for sha in hashes
            ],
            ignore_conflicts=True,
        )
        Media.objects.filter(pk=media.pk).update(rendered_views=hashes)
    media.rendered_views = hashes
    return hashes


def _store(sha256: str, media_format: str, data: bytes) -> None:
    """Writes a file into the store under its hash, whole or not at all; kept if there."""
    path = Path(settings.MEDIA_ROOT) / Media.path_for(sha256, media_format)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        write_synced(partial, data)
        os.replace(partial, path)


def write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
