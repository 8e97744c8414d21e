"""Video and audio files of an import checked in parallel: probing, decoding and re-encoding
(``av_prepare``) are CPU-bound, so a window of files is handed to bounded children
(``annotation.media.bounded``), one per file and up to ``ARBITER_MEDIA_WORKERS`` at once,
while the importing process copies files into place and writes rows (docs/operations.md,
"Import speed"). The children work inside a Celery pool process too: they are started by the
media server, not by ``multiprocessing``."""

from __future__ import annotations

from pathlib import Path

from annotation.media.av_media import AvPrepared, av_prepare
from annotation.media.bounded import BoundedError, bounded_map


def av_outcome(outcome: object) -> AvPrepared:
    """What a bounded ``av_prepare`` gave: its result, or the refusal its failure means (a
    limit hit, or an error the file provoked in the decoder)."""
    if isinstance(outcome, AvPrepared):
        return outcome
    if isinstance(outcome, BoundedError):
        return AvPrepared(error=str(outcome))
    return AvPrepared(error=f"could not be read ({type(outcome).__name__}: {outcome})")


class MediaPool:
    """Checks an import's video and audio files in bounded children."""

    def prepare(
        self, files: list[tuple[Path, str]], *, staging: Path, limits: dict[str, int]
    ) -> list[AvPrepared]:
        """``av_prepare`` of each ``(path, kind)``, in order, each in its own child."""
        calls = [
            ((path,), {"kind": kind, "staging": staging, "limits": limits}) for path, kind in files
        ]
        kinds = [kind for _, kind in files]
        return [av_outcome(outcome) for outcome in bounded_map(av_prepare, calls, kind=kinds)]
