"""An import's media: the images, videos, audio clips and 3D models its pairs name, read from
the media folder (or the unpacked archive) or, for an image, fetched by URL; verified, stripped
and rendered by ``annotation.media``, and staged until the import commits.

During an import new files wait in a staging folder under MEDIA_ROOT; ``publish`` moves them
into place (an atomic rename each) just before the transaction commits, ``discard`` drops them
when the import fails, so a refused import leaves no files behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings

from annotation.imports.fetch import FetchError, fetch_image_bytes
from annotation.imports.validate import is_url
from annotation.media.av_media import AvPrepared, av_limits, av_prepare
from annotation.media.glb import GlbError, GlbInfo, glb_inspect
from annotation.media.glb_rebuild import glb_rebuild
from annotation.media.glb_render import glb_render_views
from annotation.media.media_pool import MediaPool
from annotation.media.services import ImageInfo, MediaError, image_prepare, write_synced
from annotation.models import Media

_AV_KINDS = (Media.Kind.VIDEO, Media.Kind.AUDIO)


@dataclass(frozen=True)
class MediaRecord:
    """A verified video, audio clip or 3D model: its ``Media`` row, and the images it brings
    along (a video's poster frame, a model's rendered views)."""

    sha256: str
    kind: str
    row: dict
    extra: tuple[ImageInfo, ...] = ()
    # A browser cannot play it as it is: its served copy is made by a ``TranscodeJob``.
    transcode: bool = False


def _byte_limits() -> dict[str, int]:
    return {
        "image": settings.ARBITER_MAX_IMAGE_BYTES,
        Media.Kind.VIDEO: settings.ARBITER_MAX_VIDEO_BYTES,
        Media.Kind.AUDIO: settings.ARBITER_MAX_AUDIO_BYTES,
        Media.Kind.MODEL3D: settings.ARBITER_MAX_MODEL3D_BYTES,
    }


def _served_columns(sha256: str, served_sha256: str) -> dict:
    if served_sha256 == sha256:
        return {"served_sha256": sha256, "strip_result": Media.StripResult.UNCHANGED}
    return {"served_sha256": served_sha256, "strip_result": Media.StripResult.STRIPPED}


class MediaStore:
    """Resolves image references for one import, each distinct reference read, hashed and
    verified once; stages the bytes of images not yet in storage."""

    def __init__(
        self,
        *,
        media_root: Path | None,
        fetch: Callable[[str], bytes] = fetch_image_bytes,
        pool: MediaPool | None = None,
    ):
        self.media_root = Path(media_root).resolve() if media_root else None
        self.fetch = fetch
        self.pool = pool
        self._cache: dict[str, ImageInfo | MediaError] = {}
        self._media_cache: dict[str, MediaRecord | MediaError] = {}
        self._staged: dict[str, tuple[Path, Path]] = {}
        self._staging_dir: Path | None = None

    def resolve(self, reference: str) -> ImageInfo:
        """The verified image behind a path or URL; raises ``MediaError``."""
        cached = self._cache.get(reference)
        if cached is None:
            try:
                cached = self._image(self._read(reference), f"image {reference[:200]!r}")
            except MediaError as exc:
                cached = exc
            self._cache[reference] = cached
        if isinstance(cached, MediaError):
            raise cached
        return cached

    def _image(self, data: bytes, name: str) -> ImageInfo:
        """Checks and rebuilds an image (``image_prepare``), and stages the original and its
        served copy; raises ``MediaError`` naming it."""
        try:
            info, served = image_prepare(data)
        except MediaError as exc:
            raise MediaError(f"{name} refused: {exc}") from None
        self._stage(info.sha256, info.format, data)
        self._stage(served.sha256, served.format, served.data)
        return info

    def resolve_media(self, reference: str, *, kind: str) -> MediaRecord:
        """The verified video, audio clip or 3D model behind a path in the media folder, with
        its served copy staged; raises ``MediaError``."""
        key = f"{kind}:{reference}"
        cached = self._media_cache.get(key)
        if cached is None:
            try:
                cached = self._media_record(reference, kind=kind)
            except MediaError as exc:
                cached = exc
            self._media_cache[key] = cached
        if isinstance(cached, MediaError):
            raise cached
        return cached

    def _media_record(self, reference: str, *, kind: str) -> MediaRecord:
        if is_url(reference):
            raise MediaError(
                f"{kind} {reference[:200]!r}: video, audio and 3D files are read from the media "
                "folder or archive, not fetched by URL"
            )
        path = self._checked_path(reference, kind=kind)
        name = f"{kind} {reference!r}"
        if kind == Media.Kind.MODEL3D:
            return self._model3d_record(path, name)
        prepared = av_prepare(path, kind=kind, staging=self._staging(), limits=av_limits())
        return self._av_record(path, name, kind, prepared)

    def prefetch(self, references: list[tuple[str, str]]) -> None:
        """Checks at once, in the pool's processes, the video and audio files among
        ``references`` (content parts: ``(kind, path)``) not resolved yet, so that
        ``resolve_media`` finds them done; errors are kept for it to raise."""
        if self.pool is None or self.pool.broken:
            return
        todo: dict[str, tuple[str, str, Path]] = {}
        for kind, reference in references:
            key = f"{kind}:{reference}"
            if kind not in _AV_KINDS or key in self._media_cache or key in todo:
                continue
            if is_url(reference):
                continue
            try:
                todo[key] = (reference, kind, self._checked_path(reference, kind=kind))
            except MediaError as exc:
                self._media_cache[key] = exc
        if len(todo) < 2:
            return
        files = [(path, kind) for _, kind, path in todo.values()]
        results = self.pool.prepare(files, staging=self._staging(), limits=av_limits())
        if results is None:
            return
        for (key, (reference, kind, path)), prepared in zip(todo.items(), results, strict=True):
            try:
                self._media_cache[key] = self._av_record(
                    path, f"{kind} {reference!r}", kind, prepared
                )
            except MediaError as exc:
                self._media_cache[key] = exc

    def _av_record(self, path: Path, name: str, kind: str, prepared: AvPrepared) -> MediaRecord:
        if prepared.info is None:
            raise MediaError(f"{name} refused: {prepared.error}")
        info = prepared.info
        served_columns: dict = {
            "served_sha256": None,
            "strip_result": None,
            "served_frame_rate": None,
        }
        if prepared.served is not None:
            self._stage_file(prepared.served_sha256, info.format, prepared.served, copy=False)
            # The copy is the original's streams without their metadata: the same frame rate.
            served_columns = {
                **_served_columns(info.sha256, prepared.served_sha256),
                "served_frame_rate": info.frame_rate if kind == Media.Kind.VIDEO else None,
            }
        self._stage_file(info.sha256, info.format, path, copy=True)
        extra: tuple[ImageInfo, ...] = ()
        poster_sha256 = None
        if info.poster_jpeg is not None:
            poster = self._image(info.poster_jpeg, f"{name}'s poster frame")
            extra, poster_sha256 = (poster,), poster.sha256
        row = {
            "sha256": info.sha256,
            "kind": kind,
            "format": info.format,
            "width": info.width,
            "height": info.height,
            "size_bytes": info.size_bytes,
            "container": info.container,
            "video_codec": info.video_codec,
            "audio_codec": info.audio_codec,
            "duration_seconds": info.duration_seconds,
            "frame_rate": info.frame_rate,
            "sample_rate": info.sample_rate,
            "channels": info.channels,
            "poster_sha256": poster_sha256,
            "peaks": info.peaks,
            "loudness_lufs": info.loudness_lufs,
            **served_columns,
        }
        return MediaRecord(info.sha256, kind, row, extra, transcode=info.transcode)

    def _model3d_record(self, path: Path, name: str) -> MediaRecord:
        data = path.read_bytes()  # at most ARBITER_MAX_MODEL3D_BYTES, checked before
        try:
            info = glb_inspect(data)
            served = glb_rebuild(info)
        except GlbError as exc:
            raise MediaError(f"{name} refused: {exc}") from None
        served_sha256 = hashlib.sha256(served).hexdigest()
        views = self._rendered_views(info, name)
        self._stage(info.sha256, Media.Format.GLB, data)
        self._stage(served_sha256, Media.Format.GLB, served)
        row = {
            "sha256": info.sha256,
            "kind": Media.Kind.MODEL3D,
            "format": Media.Format.GLB,
            "width": 0,
            "height": 0,
            "size_bytes": info.size_bytes,
            "rendered_views": [view.sha256 for view in views],
            **_served_columns(info.sha256, served_sha256),
        }
        return MediaRecord(info.sha256, Media.Kind.MODEL3D, row, views)

    def _rendered_views(self, info: GlbInfo, name: str) -> tuple[ImageInfo, ...]:
        """The model's views (PNG images, rebuilt as every image is), staged; raises
        ``MediaError`` when it cannot be rendered."""
        try:
            pngs = glb_render_views(info)
        except GlbError as exc:
            raise MediaError(f"{name} refused: {exc}") from None
        return tuple(self._image(png, f"{name}'s view") for png in pngs)

    def _read(self, reference: str) -> bytes:
        if is_url(reference):
            try:
                return self.fetch(reference)
            except FetchError as exc:
                raise MediaError(f"cannot fetch {reference[:200]!r}: {exc}") from None
        return self._read_file(reference)

    def _read_file(self, reference: str) -> bytes:
        path = self._checked_path(reference, kind="image")
        return path.read_bytes()

    def _checked_path(self, reference: str, *, kind: str) -> Path:
        """The file behind a relative path in the media folder, within the size limit."""
        if self.media_root is None:
            raise MediaError(
                f"{kind} {reference!r} is a file path but no media folder or archive was given"
            )
        relative = PurePosixPath(reference)
        if relative.is_absolute() or reference.startswith(("\\", "~")):
            raise MediaError(f"{kind} path {reference!r} must be relative to the media folder")
        if ".." in relative.parts:
            raise MediaError(f"{kind} path {reference!r} must not contain '..'")
        path = (self.media_root / relative).resolve()
        if not path.is_relative_to(self.media_root):
            raise MediaError(f"{kind} path {reference!r} leads outside the media folder")
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise MediaError(f"no file {reference!r} in the media folder") from None
        if not path.is_file():
            raise MediaError(f"{reference!r} is not a file")
        limit = _byte_limits()[kind]
        if stat.st_size > limit:
            raise MediaError(f"{kind} {reference!r} is larger than {limit:,} bytes")
        return path

    def _stage(self, sha256: str, image_format: str, data: bytes) -> None:
        final = Path(settings.MEDIA_ROOT) / Media.path_for(sha256, image_format)
        if sha256 in self._staged or final.exists():
            return
        if self._staging_dir is None:
            self._staging_dir = Path(settings.MEDIA_ROOT) / ".staging" / uuid.uuid4().hex
            self._staging_dir.mkdir(parents=True)
        staged = self._staging_dir / sha256
        write_synced(staged, data)
        self._staged[sha256] = (staged, final)

    def _staging(self) -> Path:
        if self._staging_dir is None:
            self._staging_dir = Path(settings.MEDIA_ROOT) / ".staging" / uuid.uuid4().hex
            self._staging_dir.mkdir(parents=True)
        return self._staging_dir

    def _stage_file(self, sha256: str, media_format: str, source: Path, *, copy: bool) -> None:
        """Stages a file already on disk: copied in chunks (an original in the media folder)
        or moved (a served copy written in the staging folder)."""
        final = Path(settings.MEDIA_ROOT) / Media.path_for(sha256, media_format)
        if sha256 in self._staged or final.exists():
            if not copy:
                source.unlink(missing_ok=True)
            return
        staged = self._staging() / sha256
        if copy:
            shutil.copyfile(source, staged)
        else:
            os.replace(source, staged)
        with open(staged, "rb") as handle:
            os.fsync(handle.fileno())
        self._staged[sha256] = (staged, final)

    def publish(self) -> None:
        """Moves staged files into place; an existing file with the same hash is kept."""
        for staged, final in self._staged.values():
            if final.exists():
                staged.unlink(missing_ok=True)
                continue
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, final)
        self._staged.clear()
        self.discard()

    def close(self) -> None:
        """Stops the pool's processes."""
        if self.pool is not None:
            self.pool.close()

    def discard(self) -> None:
        """Removes whatever is still staged (all of it when the import failed)."""
        if self._staging_dir is not None:
            shutil.rmtree(self._staging_dir, ignore_errors=True)
            self._staging_dir = None
        self._staged.clear()
