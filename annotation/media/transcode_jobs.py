"""The life of a ``TranscodeJob``: created at import for each new video or audio file a browser
cannot play, sent to a Celery worker once the import commits, claimed by one run, its
progress written as it goes; on success the playable copy is stored by its hash and recorded
on the ``Media`` row, and the pairs that waited for it are given to the annotators. A failure
is recorded with its reason and may be retried; a job whose worker died is sent again
(docs/import-format.md, "Transcoded copies")."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.core.errors import Conflict
from annotation.core.jobs import (
    BrokerUnavailable,
    Refusal,
    StalledJobs,
    job_attempts_spent,
    job_publish,
    quarantine_reason,
    stalled_before,
)
from annotation.media.av_media import AvMediaError, file_sha256
from annotation.media.transcode import av_transcode
from annotation.models import Media, Pair, ProjectMedia, TranscodeJob

logger = logging.getLogger(__name__)

Status = TranscodeJob.Status
_UNFINISHED = (Status.PENDING, Status.RUNNING)
_PROGRESS_INTERVAL_S = 0.5
NOT_QUEUED_MESSAGE = "The transcode was not started: {reason} Retry it when the queue is back."
# The task that runs a transcode (annotation/tasks.py registers it by this name).
TRANSCODE_RUN_TASK = "annotation.tasks.transcode_run"


def transcode_jobs_create(*, media_ids: Iterable[str], import_job_id: int | None) -> None:
    """Records a pending job for each media (inside the import's transaction) and sends them
    to the workers once it commits; a job that exists already is left as it is."""
    ids = sorted(set(media_ids))
    if not ids:
        return
    TranscodeJob.objects.bulk_create(
        [TranscodeJob(media_id=sha256, import_job_id=import_job_id) for sha256 in ids],
        ignore_conflicts=True,
    )
    job_ids = list(
        TranscodeJob.objects.filter(media_id__in=ids, status=Status.PENDING).values_list(
            "pk", flat=True
        )
    )
    for job_id in job_ids:
        # A refusal is recorded on the job, which may be retried; the import stands.
        _send(job_id, after_commit=True, refusal="log")


def _send(job_id: int, *, after_commit: bool = False, refusal: Refusal = "raise") -> None:
    """Publishes the task; when the broker cannot take it the job is marked failed with the
    reason (so it can be retried) and ``BrokerUnavailable`` is raised (or logged, as
    ``refusal`` says)."""

    def refused(exc: BrokerUnavailable) -> None:
        TranscodeJob.objects.filter(pk=job_id, status=Status.PENDING).update(
            status=Status.FAILED,
            error=NOT_QUEUED_MESSAGE.format(reason=exc),
            finished_at=timezone.now(),
        )

    job_publish(
        TRANSCODE_RUN_TASK,
        args=(job_id,),
        on_refused=refused,
        refusal=refusal,
        after_commit=after_commit,
    )


def transcode_job_retry(*, job: TranscodeJob) -> TranscodeJob:
    """Sends a failed job again. ``Conflict`` unless it failed; ``Unavailable`` when the task
    queue cannot take it (the job is failed again, saying so)."""
    moved = TranscodeJob.objects.filter(pk=job.pk, status=Status.FAILED).update(
        status=Status.PENDING, error="", progress=0.0, progress_at=timezone.now()
    )
    if not moved:
        job.refresh_from_db()
        raise Conflict(f"This transcode is {job.get_status_display().lower()}: nothing to retry.")
    try:
        _send(job.pk)
    finally:
        job.refresh_from_db()
    return job


def transcode_job_run(*, job_id: int) -> None:
    """Makes the playable copy (the Celery task). Only the run that moves the job from
    pending to running works; a redelivered task finds it running or finished and returns.
    A file that cannot be transcoded fails the job with the reason."""
    claimed = TranscodeJob.objects.filter(pk=job_id, status=Status.PENDING).update(
        status=Status.RUNNING, progress_at=timezone.now(), attempts=F("attempts") + 1
    )
    if not claimed:
        return
    job = TranscodeJob.objects.select_related("media").get(pk=job_id)
    media = job.media
    if media.kind not in (Media.Kind.VIDEO, Media.Kind.AUDIO):
        transcode_job_fail(job_id=job_id, message=f"Cannot be transcoded: it is {media.kind}.")
        return
    root = Path(settings.MEDIA_ROOT)
    work = root / ".staging" / f"transcode-{uuid.uuid4().hex}"
    work.parent.mkdir(parents=True, exist_ok=True)
    last = [0.0]

    def progress(share: float) -> None:
        now = time.monotonic()
        if now - last[0] >= _PROGRESS_INTERVAL_S:
            last[0] = now
            TranscodeJob.objects.filter(pk=job_id, status=Status.RUNNING).update(
                progress=share, progress_at=timezone.now()
            )

    try:
        av_transcode(root / media.relative_path, work, kind=media.kind, progress=progress)
        served_sha256 = file_sha256(work)
        final = root / Media.path_for(served_sha256, media.format)
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(work, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(work, final)
    except (AvMediaError, FileNotFoundError) as exc:
        reason = str(exc) if isinstance(exc, AvMediaError) else "the original file is missing"
        transcode_job_fail(job_id=job_id, message=f"Cannot be transcoded: {reason}.")
        return
    finally:
        work.unlink(missing_ok=True)
    _succeed(job, served_sha256=served_sha256)


@transaction.atomic
def _succeed(job: TranscodeJob, *, served_sha256: str) -> None:
    # The row's format is the copy's since the import (``TRANSCODED_FORMATS``).
    Media.objects.filter(pk=job.media_id, served_sha256__isnull=True).update(
        served_sha256=served_sha256,
        strip_result=Media.StripResult.TRANSCODED,
        # The copy is encoded at the original's frame rate (transcode.py).
        served_frame_rate=F("frame_rate"),
    )
    TranscodeJob.objects.filter(pk=job.pk).update(
        status=Status.SUCCEEDED, progress=1.0, error="", finished_at=timezone.now()
    )
    pairs_media_ready(media_id=job.media_id)
    logger.info("transcode finished", extra={"media": job.media_id, "job": job.pk})


def transcode_job_fail(*, job_id: int, message: str) -> None:
    """Records that a job failed (the transcode was refused, or its task crashed)."""
    TranscodeJob.objects.filter(pk=job_id, status__in=_UNFINISHED).update(
        status=Status.FAILED, error=message[:2000], finished_at=timezone.now()
    )
    logger.warning("transcode failed", extra={"job": job_id, "reason": message})


def pairs_media_ready(*, media_id: str) -> int:
    """Gives to the annotators the pairs that waited for ``media_id`` and wait for nothing
    else now; returns how many. Only pairs still held back are read (few)."""
    projects = ProjectMedia.objects.filter(media_id=media_id).values("project_id")
    held = Pair.objects.filter(project_id__in=projects, media_pending=True).select_related(
        "prompt", "response_a", "response_b"
    )
    waiting: dict[int, set[str]] = {}
    for pair in held.only("prompt__content", "response_a__content", "response_b__content"):
        hashes = {
            part["media"]
            for content in (pair.prompt.content, pair.response_a.content, pair.response_b.content)
            for part in content
            if "media" in part
        }
        if media_id in hashes:
            waiting[pair.pk] = hashes
    if not waiting:
        return 0
    unplayable = set(
        Media.objects.filter(
            pk__in=set().union(*waiting.values()),
            kind__in=(Media.Kind.VIDEO, Media.Kind.AUDIO),
            served_sha256__isnull=True,
        ).values_list("pk", flat=True)
    )
    ready = [pk for pk, hashes in waiting.items() if not hashes & unplayable]
    return Pair.objects.filter(pk__in=ready, media_pending=True).update(
        media_pending=False, updated_at=timezone.now()
    )


class _StalledTranscodes(StalledJobs[tuple[int, datetime, int]]):
    """Pending or running jobs with no progress for ``ARBITER_STALLED_AFTER_S`` (their worker
    died, or their task was lost), each claimed by moving its ``progress_at`` on, so two
    sweeps never both send one; a job the broker still refuses is marked failed (retryable).
    A job whose runs were all lost with their worker (``ARBITER_JOB_MAX_ATTEMPTS``) is
    quarantined (failed, saying so) instead of sent again."""

    noun = "transcode"

    def stalled(self):
        return TranscodeJob.objects.filter(
            status__in=_UNFINISHED, progress_at__lt=stalled_before()
        ).values_list("pk", "progress_at", "attempts")

    def claim(self, job):
        job_id, progress_at, _ = job
        return TranscodeJob.objects.filter(
            pk=job_id, status__in=_UNFINISHED, progress_at=progress_at
        ).update(status=Status.PENDING, progress_at=timezone.now())

    def recover(self, job):
        job_id, _, attempts = job
        if job_attempts_spent(attempts):
            transcode_job_fail(job_id=job_id, message=quarantine_reason(attempts))
            return "quarantined"
        _send(job_id)
        return None


STALLED_TRANSCODES = _StalledTranscodes()


def transcode_jobs_resume_stalled() -> list[int]:
    """Sends again every stalled job (``_StalledTranscodes``); returns their ids."""
    return STALLED_TRANSCODES.sweep()
