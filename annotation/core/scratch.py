"""Jobs' work folders and files, and their sweep when a worker starts.

A job removes what it wrote on every way out (its ``finally`` or ``ExitStack``: success,
refusal, error, time limit), but a worker killed with ``kill -9`` or by the kernel runs no
``finally``: what its job had unpacked, staged or written in the system's temporary folder
stays. ``scratch_sweep`` removes those leftovers when a worker starts (``config/celery.py``,
``worker_init``: once per worker node, which is the only process that can reach that node's
temporary folder; a beat task runs on one node only). It removes only what is Arbiter's:
entries of the media folder's ``.staging`` and ``.unpacked`` folders, and the system
temporary folder's entries named with ``SCRATCH_PREFIX`` (``scratch_path``) or, from older
versions, ``served-<32 hex digits>``; and only those untouched for longer than the longest
job may run (``ARBITER_TASK_TIME_LIMITS`` plus ``ARBITER_TASK_KILL_AFTER_S``), so a job still
running on another worker sharing the media folder keeps its own."""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

SCRATCH_PREFIX = "arbiter-work-"
# Under MEDIA_ROOT: media staged by an import until it commits, and unpacked archives
# (annotation/imports/media.py, source.py).
MEDIA_WORK_FOLDERS = (".staging", ".unpacked")
_OLD_SERVED_COPY = re.compile(r"served-[0-9a-f]{32}")


def scratch_path(kind: str = "") -> Path:
    """A new name in the system temporary folder that the sweep knows as Arbiter's
    (``arbiter-work-<kind>-<hex>``); the caller creates and removes it."""
    label = f"{kind}-" if kind else ""
    return Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}{label}{uuid.uuid4().hex}"


def longest_job_s() -> int:
    """The longest a job's task may run before its worker kills it."""
    longest = max(limit for limit, _ in settings.ARBITER_TASK_TIME_LIMITS.values())
    return longest + settings.ARBITER_TASK_KILL_AFTER_S


def _candidates() -> Iterator[Path]:
    root = Path(settings.MEDIA_ROOT)
    for name in MEDIA_WORK_FOLDERS:
        folder = root / name
        if folder.is_dir():
            yield from folder.iterdir()
    for entry in Path(tempfile.gettempdir()).iterdir():
        if entry.name.startswith(SCRATCH_PREFIX) or _OLD_SERVED_COPY.fullmatch(entry.name):
            yield entry


def _last_touched(path: Path) -> float:
    """The newest change to ``path`` or to an entry directly inside it: a job writing into
    its folder keeps it young."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        with os.scandir(path) as entries:
            for entry in entries:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    return newest


def scratch_sweep(*, older_than_s: float | None = None) -> list[Path]:
    """Removes Arbiter's work folders and files untouched for ``older_than_s`` seconds
    (``longest_job_s()`` by default); returns what it removed. An entry that vanishes or
    cannot be read meanwhile is left alone."""
    limit = longest_job_s() if older_than_s is None else older_than_s
    cutoff = time.time() - limit
    removed = []
    for path in list(_candidates()):
        try:
            if _last_touched(path) > cutoff:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("work folder %s not removed: %s", path, exc)
            continue
        removed.append(path)
    if removed:
        logger.info("removed %d leftover work folders and files", len(removed))
    return removed
