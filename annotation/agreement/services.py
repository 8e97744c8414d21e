"""The agreement's services, the report's cache (docs/agreement.md, "The report"): recomputing
it, refreshes asked for after votes (debounced) or on demand, and those lost while the broker
was down."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from annotation.agreement.report import agreement_report_build, check_report_source
from annotation.core.errors import Conflict
from annotation.core.jobs import (
    BrokerUnavailable,
    StalledJobs,
    job_attempt_claim,
    job_attempts_spent,
    job_publish,
    quarantine_reason,
)
from annotation.models import (
    AgreementReport,
    Project,
    ReportSource,
)

# The task that recomputes a report (annotation/tasks.py registers it by this name).
# Publishing a refresh tries the broker twice, briefly, so a request never hangs on it.
REFRESH_TASK = "annotation.agreement_report_refresh"
# The sources whose reports a new vote changes.
_VOTE_SOURCES = (ReportSource.ALL, ReportSource.VOTES)

# One statement both debounces and says which reports to refresh: it stamps the reports a
# vote changes whose window is over, and only those.
_REQUEST_REFRESH_SQL = f"""
UPDATE {AgreementReport._meta.db_table} SET refresh_requested_at = %s
WHERE project_id = %s AND source IN ({", ".join(["%s"] * len(_VOTE_SOURCES))})
  AND (refresh_requested_at IS NULL OR refresh_requested_at <= %s)
RETURNING source
"""
# Seconds between a process's requests for one project's refresh, and when a project was
# last requested here (``time.monotonic``), by project id.
REQUEST_GAP_S = 1.0
_ASKED: dict[int, float] = {}
# How long a queued Recompute holds back the next one when it has not run (a worker that lost
# it, or one busy for that long): after this, another may be queued.
RECOMPUTE_PENDING_S = 300


def agreement_report_recompute(
    *, project: Project, source: str = ReportSource.ALL
) -> AgreementReport:
    """Builds the report and stores it as the project's cached one for ``source``, unless a
    report of votes read later was stored meanwhile (then that one is returned)."""
    now = timezone.now()
    data = agreement_report_build(project=project, source=source, now=now)
    fields = {
        "data": data,
        "computed_at": now,
        "votes_seen": data["votes"],
        "attempts": 0,
        "refresh_error": "",
    }
    replaced = AgreementReport.objects.filter(
        project=project, source=source, computed_at__lte=now
    ).update(**fields)
    if not replaced:
        try:
            with transaction.atomic():
                AgreementReport.objects.create(project=project, source=source, **fields)
        except IntegrityError:
            pass  # a report of later votes is there already
    return AgreementReport.objects.get(project=project, source=source)


def agreement_report_refresh(*, project: Project, source: str) -> AgreementReport | None:
    """The refresh task's work: counts the refresh's attempt on the cached report (committed
    before any work) and recomputes it; None, doing nothing, when the report's refreshes
    are out of attempts (their worker was killed each time): the refresh is quarantined,
    ``refresh_error`` says why, and only a curator's Recompute tries again. A report not
    yet built has no row to count on: its first build is asked for by a reader."""
    reports = AgreementReport.objects.filter(project=project, source=source)
    if reports.exists() and not job_attempt_claim(reports):
        agreement_refresh_quarantine(report_ids=reports.values_list("pk", flat=True))
        return None
    return agreement_report_recompute(project=project, source=source)


def agreement_refresh_quarantine(*, report_ids) -> None:
    """Stops asking for the reports' refreshes (the sweep no longer finds them lost), saying
    why on the Agreement page."""
    for pk, attempts in AgreementReport.objects.filter(pk__in=report_ids).values_list(
        "pk", "attempts"
    ):
        AgreementReport.objects.filter(pk=pk).update(
            refresh_requested_at=None, refresh_error=quarantine_reason(attempts)
        )


def agreement_report_queue_refresh(*, project: Project, source: str = ReportSource.ALL) -> None:
    """Queues a recompute of the cached report now (the Recompute button); Unavailable when
    the task broker cannot take it. One at a time per project and source: Conflict while the
    last one queued has not run, for up to ``RECOMPUTE_PENDING_S`` (then it counts as lost).
    A project without a report yet has no row to hold the stamp: its first build is queued.
    A quarantined refresh is tried again: the curator asks for it (its attempts start anew)."""
    check_report_source(source)
    now = timezone.now()
    with transaction.atomic():  # the stamp stays only when the task was queued
        reports = AgreementReport.objects.filter(project=project, source=source)
        stamped = reports.filter(
            Q(recompute_requested_at__isnull=True)
            | Q(recompute_requested_at__lte=F("computed_at"))
            | Q(recompute_requested_at__lt=now - timedelta(seconds=RECOMPUTE_PENDING_S))
        ).update(recompute_requested_at=now, attempts=0)
        if not stamped and reports.exists():
            raise Conflict(
                f"A recompute of the {source} report is queued already and has not run yet; "
                "reload the report in a moment."
            )
        try:
            job_publish(REFRESH_TASK, args=(project.pk, source), after_commit=False)
        except BrokerUnavailable as exc:
            raise BrokerUnavailable(f"{exc} The report was not recomputed.") from exc


def agreement_report_request_refresh(*, project_id: int) -> list[str]:
    """After a vote commits: queues one refresh of each cached report the vote changes, to
    run when the debounce window (ARBITER_AGREEMENT_DEBOUNCE_S) is over, unless one was
    queued in the last window; returns the sources queued. Reports nobody has asked for yet
    (no cached row) are left to their first reader.

    The debounce is a conditional UPDATE of the cached row, not a cache key: it needs no
    cache server shared by every web process, holds across restarts, and is one statement
    on the row the refresh replaces anyway. A process runs it at most once per
    ``REQUEST_GAP_S`` for a project, and the refresh it queues runs that much after the
    window: a vote this process did not ask for came less than the gap after it last asked,
    and the refresh that asking found or queued has not run yet when that vote commits
    (docs/agreement.md, "The cache and its refresh")."""
    clock = time.monotonic()
    last = _ASKED.get(project_id)
    if last is not None and clock - last < REQUEST_GAP_S:
        return []
    _ASKED[project_id] = clock
    now = timezone.now()
    window = settings.ARBITER_AGREEMENT_DEBOUNCE_S
    stamp = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            _REQUEST_REFRESH_SQL,
            [stamp(now), project_id, *_VOTE_SOURCES, stamp(now - timedelta(seconds=window))],
        )
        sources = [row[0] for row in cursor.fetchall()]
    for source in sources:
        job_publish(
            REFRESH_TASK,
            args=(project_id, source),
            countdown=window + REQUEST_GAP_S,
            after_commit=False,
        )
    return sources


def lost_refreshes() -> QuerySet[AgreementReport]:
    """Cached reports whose refresh was asked for and has not run a sweep period after it was
    due (the request's window and gap): the broker was down when the vote asked, or the
    queued task was lost. The page says "refreshing" for each of them."""
    due = settings.ARBITER_AGREEMENT_DEBOUNCE_S + REQUEST_GAP_S
    overdue = timezone.now() - timedelta(seconds=due + settings.ARBITER_RESUME_STALLED_EVERY_S)
    return AgreementReport.objects.filter(
        refresh_requested_at__gt=F("computed_at"), refresh_requested_at__lt=overdue
    )


class _LostRefreshes(StalledJobs[tuple[int, int, str, datetime, int]]):
    """Each lost refresh (``lost_refreshes``) is asked for again as a vote asks, stamping the
    request now and running the refresh after the window, so the votes of the new window are
    covered too. The stamp is the claim, so two sweeps send it once; when the broker still
    cannot take it the stamp goes back, for the next sweep. A report whose refreshes are out
    of attempts is quarantined instead of asked for again."""

    noun = "agreement refresh"

    def stalled(self):
        return lost_refreshes().values_list(
            "pk", "project_id", "source", "refresh_requested_at", "attempts"
        )

    def claim(self, job):
        now = timezone.now()
        pk, _, _, requested, _ = job
        stamped = AgreementReport.objects.filter(pk=pk, refresh_requested_at=requested).update(
            refresh_requested_at=now
        )
        return now if stamped else None

    def recover(self, job):
        pk, project_id, source, _, attempts = job
        if job_attempts_spent(attempts):
            agreement_refresh_quarantine(report_ids=[pk])
            return "quarantined"
        job_publish(
            REFRESH_TASK,
            args=(project_id, source),
            countdown=settings.ARBITER_AGREEMENT_DEBOUNCE_S + REQUEST_GAP_S,
            after_commit=False,
        )

    def unclaim(self, job, claim):
        pk, _, _, requested, _ = job
        AgreementReport.objects.filter(pk=pk, refresh_requested_at=claim).update(
            refresh_requested_at=requested
        )

    def key(self, job):
        return (job[1], job[2])


LOST_REFRESHES = _LostRefreshes()


def agreement_refreshes_send_lost() -> list[tuple[int, str]]:
    """Celery beat's sweep: asks again for each lost refresh (``_LostRefreshes``); returns
    the (project id, source) sent."""
    return LOST_REFRESHES.sweep()


def agreement_report_forget_requests() -> None:
    """Forgets when this process last asked for refreshes (a test's fresh start: database ids
    are reused across tests)."""
    _ASKED.clear()
