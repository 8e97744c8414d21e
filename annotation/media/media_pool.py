"""Video and audio files of an import checked in parallel: probing, decoding and re-encoding
(``av_prepare``) are CPU-bound and release nothing the GIL could share, so a large import
hands them to worker processes, a window of files at a time, while its own process copies
the files into place and writes rows (docs/operations.md, "Import speed").

The workers are forked from the importing process: they inherit its settings and code, are
given the limits explicitly, and touch neither the database nor Django. Where a process may
not have children (a daemonic one), or forking fails, the files are checked in the importing
process instead, as for a small import."""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from django.conf import settings

from annotation.media.av_media import AvPrepared, av_prepare

logger = logging.getLogger(__name__)


class MediaPool:
    """Up to ``ARBITER_IMPORT_MEDIA_PROCESSES`` worker processes, started on first use."""

    def __init__(self, processes: int | None = None):
        self.processes = processes or settings.ARBITER_IMPORT_MEDIA_PROCESSES
        self._executor: ProcessPoolExecutor | None = None
        self.broken = self.processes < 2 or multiprocessing.current_process().daemon

    def prepare(
        self, files: list[tuple[Path, str]], *, staging: Path, limits: dict[str, int]
    ) -> list[AvPrepared] | None:
        """``av_prepare`` of each ``(path, kind)``, in order; None when the pool cannot run
        (the caller checks the files itself)."""
        if self.broken:
            return None
        try:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=self.processes, mp_context=multiprocessing.get_context("fork")
                )
            futures = [
                self._executor.submit(av_prepare, path, kind=kind, staging=staging, limits=limits)
                for path, kind in files
            ]
            return [future.result() for future in futures]
        except (OSError, RuntimeError, AssertionError) as exc:
            # BrokenProcessPool is a RuntimeError: a worker was killed (memory, a signal).
            logger.warning("media checked in the importing process: %s", exc)
            self.close()
            self.broken = True
            return None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
