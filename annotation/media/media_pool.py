"""Video and audio files of an import checked in parallel: probing, decoding and re-encoding
are CPU-bound, so a window of files is handed to bounded children (``annotation.media.bounded``),
one per file and up to ``ARBITER_MEDIA_WORKERS`` at once; the next window is handed over
before the last one ends, so that no core waits for a window's slowest file. A child does all
of a file's work (``av_import``): the check and the served copy, the original copied and the
poster frame made into an image with its served copy, each written and synced in the staging
folder, so that the importing process only renames files and writes rows (docs/operations.md,
"Import speed"). The children work inside a Celery pool process too: they are started by the
media server, not by ``multiprocessing``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from annotation.media.av_media import AvPrepared, av_outcome, av_prepare
from annotation.media.bounded import BoundedBatch, bounded_submit
from annotation.media.services import ImageInfo, MediaError, image_prepare, write_synced


@dataclass
class AvImported:
    """A video or audio file checked for an import (``av_import``): the check, with the
    original and the served copy staged, and a video's poster frame as an image."""

    prepared: AvPrepared
    poster: ImageInfo | None = None
    # The poster's JPEG and its served copy, staged and synced.
    poster_files: tuple[Path, Path] | None = None


def av_import(path: Path, *, kind: str, staging: Path, limits: dict[str, int]) -> AvImported:
    """In a bounded child: ``av_prepare`` of the file at ``path`` keeping its original, and
    the poster frame checked as every image is, its JPEG and served copy staged."""
    prepared = av_prepare(path, kind=kind, staging=staging, limits=limits, keep_original=True)
    info = prepared.info
    if info is None or info.poster_jpeg is None:
        return AvImported(prepared)
    try:
        poster, served = image_prepare(info.poster_jpeg)
    except MediaError as exc:
        for staged in (prepared.served, prepared.original):
            if staged is not None:
                staged.unlink(missing_ok=True)
        return AvImported(AvPrepared(error=f"its poster frame cannot be made: {exc}"))
    files = (staging / f"poster-{uuid.uuid4().hex}", staging / f"poster-{uuid.uuid4().hex}")
    write_synced(files[0], info.poster_jpeg)
    write_synced(files[1], served.data)
    info.poster_jpeg = None  # staged: not pickled back
    return AvImported(prepared, poster, files)


def av_imported(outcome: object) -> AvImported:
    """What a bounded ``av_import`` gave, a limit it hit or an error turned into a refusal."""
    return outcome if isinstance(outcome, AvImported) else AvImported(av_outcome(outcome))


class MediaPool:
    """Checks an import's video and audio files in bounded children."""

    def submit(
        self, files: list[tuple[Path, str]], *, staging: Path, limits: dict[str, int]
    ) -> BoundedBatch:
        """Starts ``av_import`` of each ``(path, kind)``, each in its own child, after the
        files handed over before, and returns at once; ``av_imported`` of each of the
        batch's outcomes, in order, is the file's ``AvImported``."""
        calls = [
            ((path,), {"kind": kind, "staging": staging, "limits": limits}) for path, kind in files
        ]
        return bounded_submit(av_import, calls, kind=[kind for _, kind in files])
