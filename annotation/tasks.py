"""Celery tasks of the annotation app: thin, they take ids and call a service. A service sends
its task by the name given here (``annotation.core.jobs.job_publish``), so none imports this
module. Each has the soft and hard time limits of its kind (``time_limits``,
docs/operations.md "Time limits, attempts and quarantine")."""

from __future__ import annotations

import logging
import random
import smtplib

from celery import shared_task
from django.conf import settings

from annotation.agreement import services as agreement
from annotation.core.errors import Conflict
from annotation.core.jobs import JobTask, job_failure_text, sweep_task, time_limits
from annotation.core.mail import mail_deliver
from annotation.imports.locks import ProjectBusy
from annotation.imports.services import STALLED_IMPORTS, import_job_fail, import_job_run
from annotation.models import ImportJob, Project, Release
from annotation.releases import services as releases
from annotation.webhooks.delivery import webhook_deliveries_send_due


class ImportTask(JobTask):
    abstract = True
    job_id_arg = "job_id"
    time_limit_kind = "import"

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        message = job_failure_text(exc, f"The import task failed ({type(exc).__name__}).")
        import_job_fail(job_id=job_id, message=message)


class ReleaseBuildTask(JobTask):
    abstract = True
    job_id_arg = "release_id"
    time_limit_kind = "release build"

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        message = job_failure_text(exc, f"The build task failed ({type(exc).__name__}).")
        releases.release_build_fail(release_id=job_id, message=message)


@shared_task(
    bind=True, name="annotation.tasks.import_run", base=ImportTask, **time_limits("import")
)
def import_run(self, job_id: int) -> None:
    """Imports an uploaded file. Safe to run twice: a finished job is left alone, and a
    redelivered one (after a crash, which rolled the import back) runs again, until it is
    out of attempts. While another import into the project runs, it goes back to the queue
    (ARBITER_IMPORT_BUSY_RETRY_S, with jitter) without waiting and without an attempt."""
    job = ImportJob.objects.select_related("project").filter(pk=job_id).first()
    if job is None:
        return
    try:
        import_job_run(job=job)
    except ProjectBusy as exc:
        wait = settings.ARBITER_IMPORT_BUSY_RETRY_S
        raise self.retry(
            exc=exc, countdown=wait + random.uniform(0, wait), max_retries=None
        ) from None


imports_resume_stalled = sweep_task(
    "annotation.imports_resume_stalled",
    STALLED_IMPORTS,
    doc="Periodic (Celery beat): queues again the imports whose worker died.",
)


@shared_task(name="annotation.agreement_report_refresh", **time_limits("agreement refresh"))
def agreement_report_refresh(project_id: int, source: str) -> None:
    """Recomputes a project's cached agreement report (debounced after votes, or on demand),
    unless its refreshes are out of attempts. Safe to run twice: the newer report wins."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return
    agreement.agreement_report_refresh(project=project, source=source)


agreement_refreshes_send_lost = sweep_task(
    "annotation.agreement_refreshes_send_lost",
    agreement.LOST_REFRESHES,
    doc="Periodic (Celery beat): asks again for the refreshes asked for while the broker was "
    "down, which would otherwise wait for the next vote.",
)


@shared_task(
    bind=True,
    name="annotation.tasks.release_build_run",
    base=ReleaseBuildTask,
    **time_limits("release build"),
)
def release_build_run(self, release_id: int) -> None:
    """Builds a queued release. Safe to run twice: only the run that moves it from queued to
    building builds, or the message's next delivery after its worker died mid-build, until
    the build is out of attempts; any other finds it built (or building) and returns."""
    release = Release.objects.select_related("project").filter(pk=release_id).first()
    if release is None:
        return
    try:
        releases.release_build(release=release, claimed=True, redelivered=self.message_attempt > 1)
    except Conflict:
        return  # another run claimed it first, or it is quarantined


release_builds_fail_stalled = sweep_task(
    "annotation.release_builds_fail_stalled",
    releases.STALLED_BUILDS,
    doc="Periodic (Celery beat): builds whose worker died are marked failed.",
)


@shared_task(name="annotation.webhooks_deliver_due", **time_limits("sweep"))
def webhooks_deliver_due() -> None:
    """Sends the webhook deliveries that are due (kicked after an event commits, and
    periodically by Celery beat for retries and anything a kick missed). Safe to run twice at
    once: each sender claims its deliveries with SKIP LOCKED."""
    webhook_deliveries_send_due()


# A message the SMTP server did not take for a passing reason (connection refused or lost, a
# 4xx answer) is sent again: after 10 s, then doubling, six times in all (about 10 minutes).
MAIL_MAX_RETRIES = 6
MAIL_RETRY_BASE_S = 10
logger = logging.getLogger(__name__)


@shared_task(bind=True, name="annotation.mail_send", **time_limits("mail"))
def mail_send(self, message: dict[str, str]) -> None:
    """Sends one message (``annotation.core.mail``). A permanent refusal (a 5xx answer: no
    such mailbox, bad credentials) is logged and dropped, a passing one retried."""
    try:
        mail_deliver(message=message)
    except OSError as exc:  # smtplib's errors are OSErrors
        if isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500:
            logger.error("The SMTP server refused mail to %s: %s", message["to"], exc)
            return
        wait = MAIL_RETRY_BASE_S * 2**self.request.retries
        countdown = wait + random.uniform(0, wait / 2)
        raise self.retry(exc=exc, countdown=countdown, max_retries=MAIL_MAX_RETRIES) from None
