"""What an import writes onto its ``ImportJob``: that it started, how far it got (and when,
which is how a stalled job is found), and how it ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from annotation.core.webhook_events import webhook_event_record
from annotation.imports import sql
from annotation.models import ImportJob, Project, WebhookEventKind

if TYPE_CHECKING:
    from annotation.imports.summary import ImportSummary

_PROGRESS_INTERVAL_S = 0.5
FINISHED = (ImportJob.Status.SUCCEEDED, ImportJob.Status.FAILED)

ProgressCallback = Callable[[int, int, int], None]
"""Called as ``progress(bytes_done, bytes_total, pairs_read)`` after every batch."""


class Progress:
    """Reports progress to the caller's callback and to the job row. The import runs in a
    transaction, so job progress goes through a second connection that commits at once."""

    def __init__(self, job: ImportJob | None, callback: ProgressCallback | None, total: int):
        self.job = job
        self.callback = callback
        self.total = total
        self._last = 0.0
        self._side = None
        if job is not None:
            self._side = connections.create_connection(DEFAULT_DB_ALIAS)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._side is not None:
            self._side.close()
            self._side = None

    def update(self, bytes_done: int, pairs_read: int, *, force: bool = False) -> None:
        if self.callback is not None:
            self.callback(bytes_done, self.total, pairs_read)
        now = time.monotonic()
        if self._side is None or self.job is None:  # no job row to report to
            return
        if not force and now - self._last < _PROGRESS_INTERVAL_S:
            return
        self._last = now
        with self._side.cursor() as cursor:
            cursor.execute(
                *sql.import_job_progress(
                    job_id=self.job.pk,
                    bytes_done=min(bytes_done, self.total),
                    lines_done=pairs_read,
                    at=timezone.now(),
                )
            )


def job_status(job: ImportJob) -> str | None:
    return ImportJob.objects.filter(pk=job.pk).values_list("status", flat=True).first()


def job_update(job: ImportJob, **values) -> bool:
    """Changes an unfinished job (a finished one stays as it ended); counts as progress.
    Returns whether the job was unfinished."""
    values["progress_at"] = timezone.now()
    changed = ImportJob.objects.filter(pk=job.pk).exclude(status__in=FINISHED).update(**values)
    for key, value in values.items():
        setattr(job, key, value)
    return bool(changed)


# Of a failed import's errors, how many its webhook event lists (the job has them all).
EVENT_ERRORS_MAX = 20


def _job_finished_event(job: ImportJob) -> None:
    """The webhook event of the job that just finished, in the transaction that finished it."""
    project = Project.objects.get(pk=job.project_id)
    failed = job.status == ImportJob.Status.FAILED
    data = {
        "id": job.pk,
        "filename": job.filename,
        "status": job.status,
        "created_pairs": job.created_pairs,
        "existing_pairs": job.existing_pairs,
        "decided_pairs": job.decided_pairs,
        "errors": job.errors[:EVENT_ERRORS_MAX],
    }
    kind = WebhookEventKind.IMPORT_FAILED if failed else WebhookEventKind.IMPORT_FINISHED
    webhook_event_record(project=project, kind=kind, data={"project": project.slug, "import": data})


def job_started(job: ImportJob, total: int) -> None:
    job_update(job, status=ImportJob.Status.RUNNING, bytes_total=total, bytes_done=0)


@transaction.atomic
def job_succeeded(job: ImportJob, summary: ImportSummary, total: int) -> None:
    finished = job_update(
        job,
        status=ImportJob.Status.SUCCEEDED,
        bytes_total=total,
        bytes_done=total,
        lines_done=summary.pairs_read,
        created_pairs=summary.created_pairs,
        existing_pairs=summary.existing_pairs,
        created_media=summary.media_created,
        decided_pairs=summary.decided_pairs,
        errors=[],
        finished_at=timezone.now(),
    )
    if finished:
        _job_finished_event(job)


@transaction.atomic
def job_failed(job: ImportJob, errors: list[dict]) -> None:
    now = timezone.now()
    if job_update(job, status=ImportJob.Status.FAILED, errors=errors, finished_at=now):
        _job_finished_event(job)


def job_error(message: str) -> list[dict]:
    """A job's errors for a failure that is not about one line of the file."""
    return [{"line": None, "field": None, "message": message}]
