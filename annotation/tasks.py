"""Celery tasks of the annotation app: thin, they take ids and call a service."""

from __future__ import annotations

from celery import Task, shared_task

from annotation.errors import Conflict
from annotation.imports.jobs import import_job_fail, import_job_run, import_jobs_resume_stalled
from annotation.imports.transcode_jobs import (
    transcode_job_fail,
    transcode_job_run,
    transcode_jobs_resume_stalled,
)
from annotation.models import ImportJob, Project, Release
from annotation.services.agreement_report import agreement_report_recompute


class _ImportTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        import_job_fail(
            job_id=args[0] if args else kwargs["job_id"],
            message=f"The import task failed ({type(exc).__name__}).",
        )


@shared_task(base=_ImportTask, acks_late=True, reject_on_worker_lost=True)
def import_run(job_id: int) -> None:
    """Imports an uploaded file. Safe to run twice: a finished job is left alone, and a
    redelivered one (after a crash, which rolled the import back) runs again."""
    job = ImportJob.objects.select_related("project").filter(pk=job_id).first()
    if job is None:
        return
    import_job_run(job=job)


@shared_task(name="annotation.imports_resume_stalled")
def imports_resume_stalled() -> None:
    """Periodic (Celery beat): queues again the imports whose worker died."""
    import_jobs_resume_stalled()


class _TranscodeTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        transcode_job_fail(
            job_id=args[0] if args else kwargs["job_id"],
            message=f"The transcode task failed ({type(exc).__name__}); retry it.",
        )


@shared_task(base=_TranscodeTask, acks_late=True, reject_on_worker_lost=True)
def transcode_run(job_id: int) -> None:
    """Makes the playable copy of a video or audio file. Safe to run twice: only the run
    that moves the job from pending to running works."""
    transcode_job_run(job_id=job_id)


@shared_task(name="annotation.transcodes_resume_stalled")
def transcodes_resume_stalled() -> None:
    """Periodic (Celery beat): sends again the transcodes whose worker died."""
    transcode_jobs_resume_stalled()


@shared_task(name="annotation.agreement_report_refresh")
def agreement_report_refresh(project_id: int, source: str) -> None:
    """Recomputes a project's cached agreement report (debounced after votes, or on demand).
    Safe to run twice: the newer report wins."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return
    agreement_report_recompute(project=project, source=source)


@shared_task(name="annotation.agreement_refreshes_send_lost", ignore_result=True)
def agreement_refreshes_send_lost() -> None:
    """Periodic (Celery beat): asks again for the refreshes asked for while the broker was
    down, which would otherwise wait for the next vote."""
    from annotation.services.agreement_report import agreement_refreshes_send_lost as send

    send()


class _ReleaseBuildTask(Task):
    def on_failure(self, exc, task_id, args, kwargs, einfo):
        from annotation.services.releases import release_build_fail

        release_build_fail(
            release_id=args[0] if args else kwargs["release_id"],
            message=f"The build task failed ({type(exc).__name__}).",
        )


@shared_task(base=_ReleaseBuildTask, acks_late=True, reject_on_worker_lost=True)
def release_build_run(release_id: int) -> None:
    """Builds a queued release. Safe to run twice: only the run that moves it from queued to
    building builds; a redelivered task finds it building or built and returns."""
    from annotation.services.releases import release_build

    release = Release.objects.select_related("project").filter(pk=release_id).first()
    if release is None or release.status != Release.Status.QUEUED:
        return
    try:
        release_build(release=release, claimed=True)
    except Conflict:
        return  # another run claimed it first


@shared_task(name="annotation.release_builds_fail_stalled")
def release_builds_fail_stalled() -> None:
    """Periodic (Celery beat): builds whose worker died are marked failed."""
    from annotation.services.releases import release_builds_fail_stalled as fail_stalled

    fail_stalled()
