"""The life of an ``ImportJob``: the uploaded files are stored, imported at once when small
(through the API) or by a Celery task otherwise (always from the web form), removed once the
job has finished (whichever way it finished), and a job whose worker died is resumed. Each
run holds the project's import lock (``project_import_lock``: a busy project sends the job
back to the queue, ``ProjectBusy``) and counts its attempt before any work; a job whose
worker was killed ``ARBITER_JOB_MAX_ATTEMPTS`` times is quarantined (docs/operations.md,
"Time limits, attempts and quarantine"). An import from the command line is a job too, so
the Import page lists it; it has no stored upload (``upload_path`` is empty) and is never
resumed."""

from __future__ import annotations

import contextlib
import os
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, InterfaceError
from django.db.models import Q
from django.utils import timezone
from django.utils.text import get_valid_filename

from annotation.core import storage
from annotation.core.errors import Conflict, InvalidInput
from annotation.core.jobs import (
    BrokerUnavailable,
    StalledJobs,
    job_attempt_claim,
    job_attempts_spent,
    job_publish,
    quarantine_reason,
    stalled_before,
)
from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.imports.locks import ProjectBusy, project_import_lock
from annotation.imports.progress import FINISHED, ProgressCallback, job_error, job_failed
from annotation.imports.summary import ImportJobFinished, ImportSummary
from annotation.models import ImportJob, Project

_UNFINISHED = (ImportJob.Status.PENDING, ImportJob.Status.RUNNING)
UPLOADS = "uploads"  # the storage area of uploads in flight (annotation/core/storage.py)
# The task that runs an import (annotation/tasks.py registers it by this name).
IMPORT_RUN_TASK = "annotation.tasks.import_run"


def upload_key(folder: str, prefix: str, filename: str | None) -> str:
    """The key, in the ``uploads`` storage area, of a file uploaded for an import: chosen by
    the server (a fresh folder per job, the client's name made safe), never by the client."""
    name = get_valid_filename(os.path.basename(filename or "upload"))[-100:] or "upload"
    return f"{folder}/{prefix}-{name}"


def _save_upload(upload: UploadedFile, folder: str, prefix: str) -> str:
    return storage.storage_for(UPLOADS).save(upload_key(folder, prefix, upload.name), upload)


def _enqueue(job_id: int, *, after_commit: bool = False, **how: Any) -> None:
    """Sends the job's task (at once, unless ``after_commit``; ``job_publish``'s other options
    in ``how``)."""
    job_publish(IMPORT_RUN_TASK, args=(job_id,), after_commit=after_commit, **how)


def import_job_submit(
    *,
    project: Project,
    user,
    upload: UploadedFile,
    archive: UploadedFile | None = None,
    in_background: bool = False,
) -> ImportJob:
    """Stores the uploaded files and imports them: at once when small and not
    ``in_background`` (the returned job is finished, unless another import into the project
    was running: then it is queued), otherwise in a Celery task started after the current
    transaction commits."""
    folder = uuid.uuid4().hex
    try:
        job = ImportJob.objects.create(
            project=project,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            filename=(upload.name or "upload")[:255],
            upload_path=_save_upload(upload, folder, "pairs"),
            media_archive_path=(
                _save_upload(archive, folder, "media") if archive is not None else ""
            ),
            bytes_total=upload.size or 0,
        )
    except BaseException:
        _remove_upload_folder(folder)
        raise
    size = (upload.size or 0) + ((archive.size or 0) if archive is not None else 0)
    if not in_background and size <= settings.ARBITER_SYNC_IMPORT_MAX_BYTES:
        try:
            return import_job_run(job=job)
        except ProjectBusy:
            pass  # a request does not wait for another import: the job goes to the queue
    _enqueue_after_commit(job)
    return job


def _enqueue_after_commit(job: ImportJob) -> None:
    def refused(exc: BrokerUnavailable) -> None:
        # a job nobody will run must not stay pending
        import_job_fail(job_id=job.pk, message=f"{exc} The import could not be queued; try again.")

    _enqueue(job.pk, after_commit=True, on_refused=refused, refusal="log")


@dataclass(frozen=True)
class StoredUpload:
    """A file already in the ``uploads`` area (sent straight to the bucket by the page)."""

    key: str
    size: int
    filename: str


def import_job_submit_stored(
    *,
    project: Project,
    user,
    upload: StoredUpload,
    archive: StoredUpload | None = None,
    media_bucket_prefix: str | None = None,
) -> ImportJob:
    """Imports files already stored in the ``uploads`` area, in a Celery task started after
    the current transaction commits; they are removed once the job has finished. Media paths
    are read under ``media_bucket_prefix`` when given (a bucket import). InvalidInput
    when together they exceed ARBITER_MAX_UPLOAD_BYTES (and then they are removed)."""
    files = [upload, *([archive] if archive is not None else [])]
    keys = [stored.key for stored in files]
    if ImportJob.objects.filter(Q(upload_path__in=keys) | Q(media_archive_path__in=keys)).exists():
        raise Conflict("This upload has been imported already: upload the file again.")
    if sum(stored.size for stored in files) > settings.ARBITER_MAX_UPLOAD_BYTES:
        for stored in files:
            _remove_upload_folder(PurePosixPath(stored.key).parts[0])
        raise InvalidInput(
            f"The upload is larger than {settings.ARBITER_MAX_UPLOAD_BYTES:,} bytes."
        )
    job = ImportJob.objects.create(
        project=project,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        filename=upload.filename[:255],
        upload_path=upload.key,
        media_archive_path=archive.key if archive is not None else "",
        media_bucket_prefix=media_bucket_prefix,
        bytes_total=upload.size,
    )
    _enqueue_after_commit(job)
    return job


def import_job_run_file(
    *,
    project: Project,
    path: Path,
    media_root: Path,
    progress: ProgressCallback | None = None,
) -> ImportSummary:
    """Imports a file named on the command line, recorded as a job without a user. Raises as
    ``pairs_import`` does; a command stopped before the end (Ctrl-C) leaves the job failed."""
    job = ImportJob.objects.create(
        project=project, filename=path.name[:255], bytes_total=path.stat().st_size
    )
    try:
        return pairs_import(
            project=project, source=path, media_root=media_root, job=job, progress=progress
        )
    except BaseException:
        # A lost database connection cannot record anything; the command reports it.
        with contextlib.suppress(DatabaseError, InterfaceError):
            import_job_fail(job_id=job.pk, message="The command stopped before the import ended.")
        raise


def import_job_run(*, job: ImportJob) -> ImportJob:
    """Runs a pending job (safe to call twice: a finished job is left alone). Raises
    ``ProjectBusy`` when another import into the project holds its lock, having spent no
    attempt (waiting counts as progress, so the stalled-job sweep leaves the job to its
    task). Otherwise the attempt is counted (committed, outside a transaction) before any
    work, and a job out of attempts is quarantined instead of run. The uploaded files are
    removed once the job has finished, also when the import raised."""
    unfinished = ImportJob.objects.filter(pk=job.pk).exclude(status__in=FINISHED)
    try:
        if _finished_or_quarantined(job):
            return job
        with project_import_lock(job.project):
            if not job_attempt_claim(
                unfinished, status=ImportJob.Status.RUNNING, progress_at=timezone.now()
            ):
                _finished_or_quarantined(job)
                return job
            with ExitStack() as stack:
                archive = job.media_archive_path
                pairs_import(
                    project=job.project,
                    source=_readable(job.upload_path, stack),
                    archive=_readable(archive, stack) if archive else None,
                    media_bucket_prefix=job.media_bucket_prefix,
                    job=job,
                    locked=True,
                )
    except (ImportFailed, ImportJobFinished):
        pass
    except FileNotFoundError as exc:  # its upload was removed from storage meanwhile
        import_job_fail(job_id=job.pk, message=f"{exc}: upload the file again.")
    except ProjectBusy:
        unfinished.update(progress_at=timezone.now())
        raise
    finally:
        job.refresh_from_db()
        if job.finished:
            import_job_remove_uploads(job=job)
    return job


def _readable(key: str, stack: ExitStack) -> Path:
    """A local path of an upload: the file itself on local disk (the import names one that
    cannot be read), a temporary copy from the bucket, removed when ``stack`` closes."""
    if not storage.is_s3():
        return storage.local_root(UPLOADS) / key
    return stack.enter_context(storage.local_copy(UPLOADS, key))


def _finished_or_quarantined(job: ImportJob) -> bool:
    """True when the job has finished or has no attempt left; one out of attempts is failed
    here, saying why."""
    job.refresh_from_db(fields=["status", "attempts"])
    if job.finished:
        return True
    if not job_attempts_spent(job.attempts):
        return False
    import_job_fail(job_id=job.pk, message=quarantine_reason(job.attempts))
    job.refresh_from_db()
    return True


def import_job_fail(*, job_id: int, message: str) -> None:
    """Records a failure that happened outside the import itself (the task crashed), and
    removes the uploaded files of a job that has finished."""
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is None:
        return
    if not job.finished:
        job_failed(job, job_error(message))
    import_job_remove_uploads(job=job)


def import_job_remove_uploads(*, job: ImportJob) -> None:
    """Removes the job's uploaded files (and, on local disk, their folder)."""
    for key in (job.upload_path, job.media_archive_path):
        if key:
            _remove_upload_folder(PurePosixPath(key).parts[0])


def _remove_upload_folder(folder: str) -> None:
    """Every object under ``folder`` of the ``uploads`` area, whichever storage holds them."""
    uploads = storage.storage_for(UPLOADS)
    try:
        _, names = uploads.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        uploads.delete(f"{folder}/{name}")
    if not storage.is_s3():
        with contextlib.suppress(OSError):
            os.rmdir(uploads.path(folder))


class _StalledImports(StalledJobs[tuple[int, datetime, int]]):
    """Pending or running jobs with no progress for ``ARBITER_STALLED_AFTER_S`` (their worker
    died; their import rolled back with it), each claimed by moving its ``progress_at`` on. A
    second run of a job that was in fact still running is harmless: it finds the project's
    import lock taken and goes back to the queue until the first has finished, then leaves
    the finished job alone. A job out of attempts is quarantined here, not sent."""

    noun = "import"

    def stalled(self):
        return (
            ImportJob.objects.filter(status__in=_UNFINISHED, progress_at__lt=stalled_before())
            .exclude(upload_path="")  # a command-line import: its command runs it, or is gone
            .values_list("pk", "progress_at", "attempts")
        )

    def claim(self, job):
        job_id, progress_at, _ = job
        return ImportJob.objects.filter(
            pk=job_id, status__in=_UNFINISHED, progress_at=progress_at
        ).update(progress_at=timezone.now())

    def recover(self, job):
        job_id, _, attempts = job
        if job_attempts_spent(attempts):
            import_job_fail(job_id=job_id, message=quarantine_reason(attempts))
            return "quarantined"
        _enqueue(job_id)
        return None


STALLED_IMPORTS = _StalledImports()


def import_jobs_resume_stalled() -> list[int]:
    """Queues again every stalled job (``_StalledImports``); returns their ids."""
    return STALLED_IMPORTS.sweep()
