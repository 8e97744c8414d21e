"""Images checked and decoded with Pillow and kept byte for byte, once per sha256, as
``Media.relative_path`` in the storage's media area (annotation/core/storage.py: local disk
or the bucket); beside each one, under its own sha256, the copy the app
serves: a PNG written anew from the decoded pixels (``annotation.media.image_rebuild``), which
holds nothing else. An import reads and stages its media through ``annotation.imports.media``;
``media_strip_metadata`` and ``media_render_views`` make the served copy (an image's, or a 3D
model's rebuilt by ``annotation.media.glb_rebuild``) and a 3D model's views of media imported
before either was made at import, each in a bounded child process (``annotation.media.
bounded``), as an import does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from annotation.core import storage
from annotation.media.av_media import av_outcome, av_prepare
from annotation.media.av_probe import av_limits
from annotation.media.bounded import BoundedError, bounded_call, bounded_map
from annotation.media.copies import AV_KINDS
from annotation.media.glb import GlbError, glb_inspect
from annotation.media.glb_rebuild import glb_rebuild
from annotation.media.glb_render import glb_render_views
from annotation.media.image_rebuild import (
    SERVED_FORMAT,
    DecodedImage,
    MediaError,
    image_decode,
    image_encode,
)
from annotation.models import Media, ProjectMedia

# ``MediaError`` is defined beside the rebuild, the lowest layer that raises it; the importer
# and the views import it from here.


@dataclass(frozen=True)
class ImageInfo:
    sha256: str
    format: str
    # As shown, which is the served copy's size: after the EXIF orientation.
    width: int
    height: int
    size_bytes: int
    # Set once the served copy is made (``image_prepare``).
    served_sha256: str | None = None
    strip_result: Media.StripResult | None = None
    served_format: str | None = None


@dataclass(frozen=True)
class ServedCopy:
    """The copy of an image the app serves: ``data``, a PNG of its pixels alone."""

    sha256: str
    data: bytes
    width: int
    height: int
    format: str = SERVED_FORMAT
    result: Media.StripResult = Media.StripResult.REBUILT


def image_inspect(data: bytes) -> ImageInfo:
    """Checks ``data`` from its header against the pixel and frame limits and decodes it
    whole; raises ``MediaError`` for non-images, other formats, bombs and corrupt files."""
    return _info(data, image_decode(data))


def served_copy_make(*, data: bytes) -> ServedCopy:
    """The served copy of an image: its pixels written anew as PNG, without metadata. Raises
    ``MediaError`` when it cannot be decoded whole (it is then not served at all)."""
    return _served(image_decode(data))


def image_prepare(data: bytes) -> tuple[ImageInfo, ServedCopy]:
    """``image_inspect`` and ``served_copy_make`` from one decoding, the info recording the
    served copy: what an import stores."""
    decoded = image_decode(data)
    served = _served(decoded)
    info = _info(data, decoded)
    return ImageInfo(
        sha256=info.sha256,
        format=info.format,
        width=info.width,
        height=info.height,
        size_bytes=info.size_bytes,
        served_sha256=served.sha256,
        strip_result=served.result,
        served_format=served.format,
    ), served


def _info(data: bytes, decoded: DecodedImage) -> ImageInfo:
    return ImageInfo(
        sha256=hashlib.sha256(data).hexdigest(),
        format=decoded.source_format,
        width=decoded.width,
        height=decoded.height,
        size_bytes=len(data),
    )


def _served(decoded: DecodedImage) -> ServedCopy:
    png = image_encode(decoded)
    return ServedCopy(
        sha256=hashlib.sha256(png).hexdigest(),
        data=png,
        width=decoded.width,
        height=decoded.height,
    )


def served_copy_of_file(path: Path) -> ServedCopy:
    """In a bounded child: ``served_copy_make`` of the stored image at ``path``."""
    return served_copy_make(data=path.read_bytes())


def model3d_copy_of_file(path: Path) -> bytes:
    """In a bounded child: the served copy of the stored GLB model at ``path``."""
    return glb_rebuild(glb_inspect(path.read_bytes()))


def rendered_views_of_file(path: Path) -> list[tuple[ImageInfo, ServedCopy, bytes]]:
    """In a bounded child: the views of the stored GLB model at ``path``, each with its info,
    its served copy and the rendered PNG."""
    return [(*image_prepare(png), png) for png in glb_render_views(glb_inspect(path.read_bytes()))]


def media_strip_metadata(*, media: Media, remake: bool = False) -> None:
    """Makes and stores the served copy of ``media`` imported before served copies were
    rebuilt (or, with ``remake``, made by an earlier version), in a bounded child, and records
    it on the row: an image or a 3D model rebuilt, a video or audio clip re-encoded as an
    import does. Raises ``FileNotFoundError`` when the original is missing and ``MediaError``
    when it cannot be rebuilt (or hits a limit): the row then has no served copy, so nothing
    of it is served. Two calls at once for one file write the same file and the same values."""
    with storage.local_copy("media", media.relative_path) as original:
        if media.kind in AV_KINDS:
            _av_reencode(media, original)
            return
        _rebuild(media, original, remake=remake)


def _rebuild(media: Media, original: Path, *, remake: bool) -> None:
    """The served copy of an image or a 3D model rebuilt from ``original`` and recorded."""
    rows = Media.objects.filter(pk=media.pk)
    try:
        if media.kind == Media.Kind.MODEL3D:
            glb = bounded_call(model3d_copy_of_file, original, kind=Media.Kind.MODEL3D.value)
            served = ServedCopy(hashlib.sha256(glb).hexdigest(), glb, 0, 0, Media.Format.GLB)
        else:
            served = bounded_call(served_copy_of_file, original, kind=Media.Kind.IMAGE.value)
    except (MediaError, GlbError, BoundedError) as exc:
        rows.update(served_sha256=None, strip_result=None, served_format=None)
        media.served_sha256 = media.strip_result = media.served_format = None
        raise MediaError(str(exc)) from None
    _store(served.sha256, served.format, served.data)
    if not remake:
        rows = rows.filter(served_sha256__isnull=True)
    columns: dict = {
        "served_sha256": served.sha256,
        "strip_result": served.result,
        "served_format": None if media.kind == Media.Kind.MODEL3D else served.format,
    }
    if media.kind == Media.Kind.IMAGE:
        columns |= {"width": served.width, "height": served.height}
    rows.update(**columns)
    for name, value in columns.items():
        setattr(media, name, value)


def _av_reencode(media: Media, original: Path) -> None:
    """The served copy of a video or audio clip imported before every copy was re-encoded,
    made as an import makes it (``av_prepare``, in a bounded child) and recorded on the row;
    ``MediaError`` with the reason when it is refused."""
    staging = storage.work_folder("media")
    try:
        call = ((original,), {"kind": media.kind, "staging": staging, "limits": av_limits()})
        [outcome] = bounded_map(av_prepare, [call], kind=media.kind)
        prepared = av_outcome(outcome)
        if prepared.info is None or prepared.served is None:
            Media.objects.filter(pk=media.pk).update(served_sha256=None, strip_result=None)
            media.served_sha256 = media.strip_result = None
            raise MediaError(prepared.error)
        name = Media.path_for(prepared.served_sha256, prepared.info.served_format)
        if not storage.exists("media", name):
            storage.put_file(
                "media", name, prepared.served, move=True, sealed_as=prepared.served_sha256
            )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    columns = {
        "served_sha256": prepared.served_sha256,
        "strip_result": Media.StripResult.REBUILT,
        "served_format": prepared.info.served_format,
        "served_frame_rate": prepared.info.served_frame_rate,
    }
    Media.objects.filter(pk=media.pk).update(**columns)
    for name, value in columns.items():
        setattr(media, name, value)


def media_render_views(*, media: Media) -> list[str]:
    """Renders the views of a 3D model imported before views were rendered at import, stores
    them as image media linked to every project that uses the model, and records them on its
    row; returns their hashes. Raises ``GlbError`` for a model that cannot be rendered,
    ``BoundedError`` when rendering it hits a limit and ``FileNotFoundError`` when its
    original is missing."""
    with storage.local_copy("media", media.relative_path) as original:
        rendered = bounded_call(rendered_views_of_file, original, kind="model3d")
    views = []
    for view, served, png in rendered:
        _store(view.sha256, view.format, png)
        _store(served.sha256, served.format, served.data)
        views.append(view)
    hashes = [view.sha256 for view in views]
    with transaction.atomic():
        Media.objects.bulk_create(
            [Media(**image_row(view)) for view in views], ignore_conflicts=True
        )
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


def image_row(info: ImageInfo) -> dict:
    """The columns of a prepared image's ``Media`` row."""
    return {
        "sha256": info.sha256,
        "kind": Media.Kind.IMAGE,
        "format": info.format,
        "width": info.width,
        "height": info.height,
        "size_bytes": info.size_bytes,
        "served_sha256": info.served_sha256,
        "strip_result": info.strip_result,
        "served_format": info.served_format,
    }


def _store(sha256: str, media_format: str, data: bytes) -> None:
    """Writes a file into the store under its hash, whole or not at all; kept if there."""
    name = Media.path_for(sha256, media_format)
    if not storage.exists("media", name):
        storage.put_bytes("media", name, data, sealed_as=sha256)


def write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
