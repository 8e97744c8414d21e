"""An import's media: the images, videos, audio clips and 3D models its pairs name, read from
the media folder (or the unpacked archive) or, for an image, fetched by URL; verified, stripped
and rendered by ``annotation.media``, and staged until the import commits. Every check of a
file runs in a bounded child process (``annotation.media.bounded``): a file that hits a limit
is refused with the reason, as a corrupt one is; a window of files is checked in parallel.

During an import new files wait in a local staging folder (``storage.work_folder``: beside the
media on disk, in the scratch folder with the bucket); ``publish`` moves them into storage (an
atomic rename, or an upload, each) just before the transaction commits, ``discard`` drops them
when the import fails, so a refused import leaves no files behind.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import cast

from django.conf import settings

from annotation.core import storage
from annotation.imports.bucket_folder import BucketFolder
from annotation.imports.fetch import FetchError, fetch_image_bytes
from annotation.imports.validate import is_url
from annotation.media.av_probe import av_limits
from annotation.media.bounded import BoundedBatch, BoundedError, bounded_map
from annotation.media.copies import AV_KINDS
from annotation.media.glb import GlbError, glb_inspect
from annotation.media.glb_rebuild import glb_rebuild
from annotation.media.glb_render import glb_render_views
from annotation.media.media_pool import AvImported, MediaPool, av_import, av_imported
from annotation.media.services import (
    ImageInfo,
    MediaError,
    ServedCopy,
    image_prepare,
    write_synced,
)
from annotation.models import Media

_IMAGE = "image"
# Images checked one after the other in a child: starting a child costs more than checking
# a small image (docs/operations.md, "Bounded media work").
IMAGE_BATCH = 16
# Files uploaded to the bucket at once when an import publishes.
PUBLISH_UPLOADS = 8


@dataclass(frozen=True)
class MediaRecord:
    """A verified video, audio clip or 3D model: its ``Media`` row, and the images it brings
    along (a video's poster frame, a model's rendered views)."""

    sha256: str
    kind: str
    row: dict
    extra: tuple[ImageInfo, ...] = ()


def image_check(source: bytes | Path) -> tuple[ImageInfo, ServedCopy]:
    """In a bounded child: an image verified, and its served copy (``image_prepare``)."""
    return image_prepare(source if isinstance(source, bytes) else source.read_bytes())


@dataclass(frozen=True)
class Model3dChecked:
    """A binary glTF model verified, its served copy and its rendered views (PNG images
    without metadata, each with its ``ImageInfo``)."""

    sha256: str
    size_bytes: int
    served: bytes
    # Each view's info, its served copy (rebuilt as every image is) and the rendered PNG.
    views: tuple[tuple[ImageInfo, ServedCopy, bytes], ...]


def model3d_check(path: Path) -> Model3dChecked:
    """In a bounded child: a GLB file verified, rebuilt and rendered; raises ``GlbError``."""
    info = glb_inspect(path.read_bytes())  # at most ARBITER_MAX_MODEL3D_BYTES, checked before
    served = glb_rebuild(info)
    views = tuple((*image_prepare(png), png) for png in glb_render_views(info))
    return Model3dChecked(info.sha256, info.size_bytes, served, views)


def _cache_outcome(cache: dict, key: str, make: Callable[[], object]) -> None:
    try:
        cache[key] = make()
    except MediaError as exc:
        cache[key] = exc


def _refusal(name: str, outcome: BaseException) -> MediaError:
    """The import's line for a file whose check failed in its child: the parser's reason, the
    limit it hit, or (an error the file provoked in code that should have refused it) the
    error's name and message, never a traceback."""
    if isinstance(outcome, (MediaError, GlbError, BoundedError)):
        return MediaError(f"{name} refused: {outcome}")
    return MediaError(f"{name} refused: could not be read ({type(outcome).__name__}: {outcome})")


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


def _publish_one(staged: tuple[Path, str, str | None]) -> None:
    """Stores a staged file, sealed by the hash taken of its bytes as they were written when
    there is one (docs/releases.md, "Sealed media files"), unless the same bytes are stored
    already."""
    path, name, sealed_as = staged
    if storage.exists("media", name):
        path.unlink(missing_ok=True)
    else:
        storage.put_file("media", name, path, move=True, sealed_as=sealed_as)


class Prefetch:
    """Files whose checks ``MediaStore.prefetch`` started; ``finish`` waits for them and
    keeps their outcomes, ``close`` (a prefetch left unfinished) waits for the children that
    write into the staging folder."""

    def __init__(
        self,
        store: MediaStore,
        images: dict[str, bytes | Path],
        models: dict[str, tuple[str, Path]],
        av: dict[str, tuple[str, str, Path]],
        batch: BoundedBatch | None,
        keys: set[str],
    ):
        self._store = store
        self._parts = (images, models, av)
        self._batch = batch
        self._keys = keys

    def finish(self) -> None:
        try:
            self._store._prefetched(*self._parts, self._batch)
        finally:
            self.close()

    def close(self) -> None:
        try:
            if self._batch is not None:
                self._batch.close()
        finally:
            self._store._prefetching -= self._keys


class MediaStore:
    """Resolves image references for one import, each distinct reference read, hashed and
    verified once; stages the bytes of images not yet in storage."""

    def __init__(
        self,
        *,
        media_root: Path | None,
        fetch: Callable[[str], bytes] = fetch_image_bytes,
        pool: MediaPool | None = None,
        media_bucket: BucketFolder | None = None,
    ):
        self.media_root = Path(media_root).resolve() if media_root else None
        self.media_bucket = media_bucket
        self.fetch = fetch
        self.pool = pool
        self._cache: dict[str, ImageInfo | MediaError] = {}
        self._media_cache: dict[str, MediaRecord | MediaError] = {}
        # sha256 -> the staged file, its name, the sha256 taken of its bytes as written
        self._staged: dict[str, tuple[Path, str, str | None]] = {}
        self._staging_dir: Path | None = None
        # The keys (``kind:reference``) of files in a prefetch not finished yet.
        self._prefetching: set[str] = set()

    def resolve(self, reference: str) -> ImageInfo:
        """The verified image behind a path or URL; raises ``MediaError``."""
        cached = self._cache.get(reference)
        if cached is None:
            try:
                source = self._image_source(reference)
                [outcome] = bounded_map(image_check, [((source,), {})], kind=_IMAGE)
                cached = self._image_record(reference, source, outcome)
            except MediaError as exc:
                cached = exc
            self._cache[reference] = cached
        if isinstance(cached, MediaError):
            raise cached
        return cached

    def _image_source(self, reference: str) -> bytes | Path:
        """What the child reads: the fetched bytes of a URL, or the path of a file."""
        if is_url(reference):
            try:
                return self.fetch(reference)
            except FetchError as exc:
                raise MediaError(f"cannot fetch {reference[:200]!r}: {exc}") from None
        return self._checked_path(reference, kind=_IMAGE)

    def _image_record(self, reference: str, source: bytes | Path, outcome: object) -> ImageInfo:
        if isinstance(outcome, BaseException):
            raise _refusal(f"image {reference[:200]!r}", outcome)
        info, served = cast(tuple[ImageInfo, ServedCopy], outcome)
        data = source if isinstance(source, bytes) else source.read_bytes()
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
            [outcome] = bounded_map(model3d_check, [((path,), {})], kind=kind)
            return self._model3d_record(path, name, outcome)
        call = ((path,), {"kind": kind, "staging": self._staging(), "limits": av_limits()})
        [outcome] = bounded_map(av_import, [call], kind=kind)
        return self._av_record(name, kind, av_imported(outcome))

    def prefetch(self, references: list[tuple[str, str]]) -> Prefetch:
        """Starts checking, in bounded children (up to ``ARBITER_MEDIA_WORKERS`` at a time),
        the files among ``references`` (content parts: ``(kind, reference)``) neither
        resolved yet nor in an earlier prefetch, and returns at once: the video and audio
        files go to the media server now, behind those of earlier prefetches. ``finish``
        (prefetches in the order they were made) waits for them, so that ``resolve`` and
        ``resolve_media`` find them done; errors are kept for them to raise. The pool
        checks video and audio; images and models are checked when the prefetch finishes."""
        images: dict[str, bytes | Path] = {}
        models: dict[str, tuple[str, Path]] = {}
        av: dict[str, tuple[str, str, Path]] = {}
        for kind, reference in references:
            key = f"{kind}:{reference}"
            if key in self._media_cache or reference in self._cache or key in self._prefetching:
                continue
            if kind == _IMAGE:
                if reference not in images:
                    try:
                        images[reference] = self._image_source(reference)
                    except MediaError as exc:
                        self._cache[reference] = exc
                continue
            if is_url(reference) or key in av or key in models:
                continue  # refused by resolve_media
            try:
                path = self._checked_path(reference, kind=kind)
            except MediaError as exc:
                self._media_cache[key] = exc
                continue
            if kind == Media.Kind.MODEL3D:
                models[key] = (reference, path)
            elif kind in AV_KINDS and self.pool is not None:
                av[key] = (reference, kind, path)
        batch = None
        if av and self.pool is not None:
            files = [(path, kind) for _, kind, path in av.values()]
            batch = self.pool.submit(files, staging=self._staging(), limits=av_limits())
        keys = {f"{_IMAGE}:{reference}" for reference in images} | models.keys() | av.keys()
        self._prefetching |= keys
        return Prefetch(self, images, models, av, batch, keys)

    def _prefetched(
        self,
        images: dict[str, bytes | Path],
        models: dict[str, tuple[str, Path]],
        av: dict[str, tuple[str, str, Path]],
        batch: BoundedBatch | None,
    ) -> None:
        """A prefetch's end (``Prefetch.finish``): the images and models checked, then
        everything staged and its outcome kept."""
        checks = self._bounded_checks(images, models)
        if batch is not None:
            with batch:
                outcomes = batch.outcomes()
            for (key, (reference, kind, _path)), outcome in zip(av.items(), outcomes, strict=True):
                try:
                    self._media_cache[key] = self._av_record(
                        f"{kind} {reference!r}", kind, av_imported(outcome)
                    )
                except MediaError as exc:
                    self._media_cache[key] = exc
        for finish in checks:
            finish()

    def _bounded_checks(
        self, images: dict[str, bytes | Path], models: dict[str, tuple[str, Path]]
    ) -> list[Callable[[], None]]:
        """Checks ``images`` and ``models`` in bounded children; returns, for each, what
        stages it and caches its outcome (run after the pool's files are staged)."""
        image_outcomes = iter(
            bounded_map(image_check, [((source,), {}) for source in images.values()],
                        kind=_IMAGE, batch=IMAGE_BATCH)
            if images else []
        )  # fmt: skip
        model_outcomes = iter(
            bounded_map(model3d_check, [((path,), {}) for _, path in models.values()],
                        kind=Media.Kind.MODEL3D.value)
            if models else []
        )  # fmt: skip
        finishes: list[Callable[[], None]] = []
        for reference, source in images.items():
            image = functools.partial(self._image_record, reference, source, next(image_outcomes))
            finishes.append(functools.partial(_cache_outcome, self._cache, reference, image))
        for key, (reference, path) in models.items():
            model = functools.partial(
                self._model3d_record, path, f"model3d {reference!r}", next(model_outcomes)
            )
            finishes.append(functools.partial(_cache_outcome, self._media_cache, key, model))
        return finishes

    def _av_record(self, name: str, kind: str, imported: AvImported) -> MediaRecord:
        """Stages what the child wrote (the original, the served copy, the poster's files:
        renames) and gives the file's record."""
        prepared = imported.prepared
        if prepared.info is None or prepared.served is None or prepared.original is None:
            raise MediaError(f"{name} refused: {prepared.error}")
        info = prepared.info
        # Re-encoded from the decoded frames and samples, in the one served format.
        self._stage_file(prepared.served_sha256, info.served_format, prepared.served)
        self._stage_file(info.sha256, info.format, prepared.original)
        extra: tuple[ImageInfo, ...] = ()
        poster_sha256 = None
        if imported.poster is not None and imported.poster_files is not None:
            poster = imported.poster
            # image_prepare records the served copy on the info it gives.
            assert poster.served_sha256 is not None
            assert poster.served_format is not None
            self._stage_file(poster.sha256, poster.format, imported.poster_files[0])
            self._stage_file(poster.served_sha256, poster.served_format, imported.poster_files[1])
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
            "served_sha256": prepared.served_sha256,
            "served_format": info.served_format,
            "strip_result": Media.StripResult.REBUILT,
            "served_frame_rate": info.served_frame_rate,
        }
        return MediaRecord(info.sha256, kind, row, extra)

    def _model3d_record(self, path: Path, name: str, outcome: object) -> MediaRecord:
        if isinstance(outcome, BaseException):
            raise _refusal(name, outcome)
        info = cast(Model3dChecked, outcome)
        served_sha256 = hashlib.sha256(info.served).hexdigest()
        views = []
        for view, served, png in info.views:
            self._stage(view.sha256, view.format, png)
            self._stage(served.sha256, served.format, served.data)
            views.append(view)
        self._stage(info.sha256, Media.Format.GLB, path.read_bytes())
        self._stage(served_sha256, Media.Format.GLB, info.served)
        row = {
            "sha256": info.sha256,
            "kind": Media.Kind.MODEL3D,
            "format": Media.Format.GLB,
            "width": 0,
            "height": 0,
            "size_bytes": info.size_bytes,
            "rendered_views": [view.sha256 for view in views],
            # Written anew from an allowlist (annotation.media.glb_rebuild).
            "served_sha256": served_sha256,
            "strip_result": Media.StripResult.REBUILT,
        }
        return MediaRecord(info.sha256, Media.Kind.MODEL3D, row, tuple(views))

    def _checked_path(self, reference: str, *, kind: str) -> Path:
        """The file behind a relative path in the media folder (or the bucket prefix: a
        temporary copy), within the size limit."""
        if self.media_root is None and self.media_bucket is None:
            raise MediaError(
                f"{kind} {reference!r} is a file path but no media folder or archive was given"
            )
        relative = PurePosixPath(reference)
        if relative.is_absolute() or reference.startswith(("\\", "~")):
            raise MediaError(f"{kind} path {reference!r} must be relative to the media folder")
        if ".." in relative.parts:
            raise MediaError(f"{kind} path {reference!r} must not contain '..'")
        limit = _byte_limits()[kind]
        if self.media_bucket is not None:
            return self.media_bucket.fetch(relative.as_posix(), kind=kind, limit=limit)
        assert self.media_root is not None
        path = (self.media_root / relative).resolve()
        if not path.is_relative_to(self.media_root):
            raise MediaError(f"{kind} path {reference!r} leads outside the media folder")
        try:
            stat = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise MediaError(f"no file {reference!r} in the media folder") from None
        if not path.is_file():
            raise MediaError(f"{reference!r} is not a file")
        if stat.st_size > limit:
            raise MediaError(f"{kind} {reference!r} is larger than {limit:,} bytes")
        return path

    def _stage(self, sha256: str, image_format: str, data: bytes) -> None:
        name = Media.path_for(sha256, image_format)
        if sha256 in self._staged or storage.exists("media", name):
            return
        staged = self._staging() / sha256
        write_synced(staged, data)
        # Sealed only when the bytes written are those the child hashed (a file read again
        # from the media folder could have changed in between).
        sealed = sha256 if hashlib.sha256(data).hexdigest() == sha256 else None
        self._staged[sha256] = (staged, name, sealed)

    def _staging(self) -> Path:
        if self._staging_dir is None:
            self._staging_dir = storage.work_folder("media")
        return self._staging_dir

    def _stage_file(self, sha256: str, media_format: str, source: Path) -> None:
        """Stages a file that a child wrote and synced in the staging folder (a rename), or
        removes it when the same bytes are staged or stored already."""
        name = Media.path_for(sha256, media_format)
        if sha256 in self._staged or storage.exists("media", name):
            source.unlink(missing_ok=True)
            return
        staged = self._staging() / sha256
        os.replace(source, staged)
        self._staged[sha256] = (staged, name, sha256)  # the child hashed what it wrote

    def publish(self) -> None:
        """Moves staged files into storage; an existing file with the same hash is kept.
        Uploads to the bucket go ``PUBLISH_UPLOADS`` at a time (each waits on the network)."""
        staged = list(self._staged.values())
        if storage.is_s3() and len(staged) > 1:
            with ThreadPoolExecutor(PUBLISH_UPLOADS, thread_name_prefix="publish") as pool:
                list(pool.map(_publish_one, staged))
        else:
            for each in staged:
                _publish_one(each)
        self._staged.clear()
        self.discard()

    def discard(self) -> None:
        """Removes whatever is still staged (all of it when the import failed)."""
        if self._staging_dir is not None:
            shutil.rmtree(self._staging_dir, ignore_errors=True)
            self._staging_dir = None
        self._staged.clear()
