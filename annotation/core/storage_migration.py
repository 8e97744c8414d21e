"""Copies an existing deployment's files from its local folders into the bucket
(``manage.py migrate_storage``; docs/operations.md, "Moving files to the bucket").

Every file of every area's local folder (``storage.local_names``) is copied to its object key
(``storage.bucket_key``: media under opaque keys) and then read back and checked against the
local file's sha256. An object already there with the right hash is skipped, so a migration
cut short is resumed by running it again; one with other bytes (corrupted, or cut short by an
earlier run) is copied again. The local files are never changed or removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from annotation.core import storage

_READ_BYTES = 1024 * 1024


class Outcome(Enum):
    COPIED = "copied"
    SKIPPED = "already in the bucket"
    REPLACED = "replaced: the object had other bytes"
    FAILED = "failed"


@dataclass
class MigrationSummary:
    """What a migration did (or, with ``dry_run``, would do), file by file."""

    dry_run: bool
    counts: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))
    bytes_copied: int = 0
    failures: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)

    @property
    def files(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class _Done:
    area: str
    name: str
    outcome: Outcome
    size: int
    detail: str = ""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def object_sha256(area: str, name: str) -> str | None:
    """The sha256 of the bytes stored as ``name``, read back whole; None when not stored."""
    try:
        stream = storage.open_stream(area, name)
    except FileNotFoundError:
        return None
    digest = hashlib.sha256()
    try:
        for block in stream:
            digest.update(block)
    finally:
        stream.close()
    return digest.hexdigest()


def _migrate_one(area: str, name: str, *, dry_run: bool) -> _Done:
    local = storage.local_root(area) / name
    try:
        wanted = file_sha256(local)
        found = object_sha256(area, name)
        size = local.stat().st_size
        if found == wanted:
            return _Done(area, name, Outcome.SKIPPED, size)
        outcome = Outcome.COPIED if found is None else Outcome.REPLACED
        if dry_run:
            return _Done(area, name, outcome, size)
        storage.put_file(area, name, local)
        stored = object_sha256(area, name)
        if stored != wanted:
            return _Done(area, name, Outcome.FAILED, size, f"read back with sha256 {stored}")
    except (OSError, BotoCoreError, ClientError) as exc:  # one line each, the others go on
        return _Done(area, name, Outcome.FAILED, 0, f"{type(exc).__name__}: {exc}")
    return _Done(area, name, outcome, size)


def storage_migrate(
    *,
    areas: Iterable[str] = storage.AREAS,
    dry_run: bool = False,
    jobs: int = 8,
    progress: Callable[[int, int, str], None] | None = None,
) -> MigrationSummary:
    """Copies and verifies every local file of ``areas`` into the bucket, ``jobs`` at a time;
    ``progress(done, total, name)`` after each. Needs ``ARBITER_STORAGE=s3``."""
    if not storage.is_s3():
        raise ValueError("set ARBITER_STORAGE=s3 and ARBITER_S3_BUCKET to copy files to a bucket")
    work = [(area, name) for area in areas for name in storage.local_names(area)]
    summary = MigrationSummary(dry_run=dry_run)
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="migrate") as pool:
        done_files = pool.map(lambda item: _migrate_one(*item, dry_run=dry_run), work)
        for number, done in enumerate(done_files, start=1):
            summary.counts[done.outcome] += 1
            label = f"{done.area}/{done.name}"
            if done.outcome == Outcome.FAILED:
                summary.failures.append(f"{label}: {done.detail}")
            elif done.outcome != Outcome.SKIPPED:
                summary.bytes_copied += done.size
                if done.outcome == Outcome.REPLACED:
                    summary.replaced.append(label)
            if progress is not None:
                progress(number, len(work), label)
    return summary
