"""Refreshing the cached agreement report: votes through the API queue at most one refresh
per debounce window, a real worker on Redis recomputes it, and Recompute queues one now."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from kombu.exceptions import OperationalError

from annotation import tasks
from annotation.agreement import services as refresh
from annotation.agreement.services import agreement_report_recompute
from annotation.models import AgreementReport
from tests.factories import PairFactory


def claim_and_vote(api, slug: str = "demo", choice: str = "left") -> None:
    claimed = api.post(f"/api/v1/projects/{slug}/claim/")
    assert claimed.status_code == 200, claimed.content
    voted = api.post(
        f"/api/v1/assignments/{claimed.json()['id']}/vote/", {"choice": choice}, format="json"
    )
    assert voted.status_code == 201, voted.content


@pytest.fixture
def queued(monkeypatch):
    """The refreshes queued, as (args, options), instead of running them."""
    calls: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(
        tasks.agreement_report_refresh,
        "apply_async",
        lambda args, **options: calls.append((tuple(args), options)),
    )
    return calls


@pytest.fixture
def clock(monkeypatch):
    """The process's clock for its refresh requests, moved by hand (``clock[0] += s``)."""
    now = [1000.0]
    monkeypatch.setattr(refresh.time, "monotonic", lambda: now[0])
    return now


def test_votes_in_one_window_queue_one_refresh(
    project,
    alice,
    bob,
    api_for,
    queued_pairs,
    queued,
    settings,
    clock,
    django_capture_on_commit_callbacks,
):
    settings.ARBITER_AGREEMENT_DEBOUNCE_S = 30
    agreement_report_recompute(project=project)  # someone has read the report
    for user in (alice, bob):
        clock[0] += 2  # past this process's gap: the window alone holds the second back
        with django_capture_on_commit_callbacks(execute=True):
            claim_and_vote(api_for(user))
    # It runs a gap after the window, so it reads the votes of the window and of the gap.
    expected = 30 + refresh.REQUEST_GAP_S
    assert [(args, options["countdown"]) for args, options in queued] == [
        ((project.pk, "all"), expected)
    ]
    # Once the window is over, the next vote queues the next refresh.
    report = AgreementReport.objects.get(project=project, source="all")
    AgreementReport.objects.filter(pk=report.pk).update(
        refresh_requested_at=report.refresh_requested_at - timedelta(seconds=31)
    )
    clock[0] += 2
    with django_capture_on_commit_callbacks(execute=True):
        claim_and_vote(api_for(alice))
    assert len(queued) == 2


def test_a_process_asks_at_most_once_a_gap(
    project, alice, bob, api_for, queued_pairs, queued, clock, django_capture_on_commit_callbacks
):
    agreement_report_recompute(project=project)
    for user in (alice, bob):
        with django_capture_on_commit_callbacks(execute=True):
            claim_and_vote(api_for(user))
    # Both votes came within the gap: the second ran no statement and queued nothing; the
    # first one's refresh, a gap after the window, reads both.
    assert len(queued) == 1
    report = AgreementReport.objects.get(project=project, source="all")
    AgreementReport.objects.filter(pk=report.pk).update(refresh_requested_at=None)
    with django_capture_on_commit_callbacks(execute=True):
        claim_and_vote(api_for(alice))
    assert len(queued) == 1  # still within the gap, whatever the row says
    clock[0] += refresh.REQUEST_GAP_S
    with django_capture_on_commit_callbacks(execute=True):
        claim_and_vote(api_for(bob))
    assert len(queued) == 2


def test_votes_refresh_only_the_reports_they_change(
    project, alice, api_for, queued_pairs, queued, django_capture_on_commit_callbacks
):
    for source in ("votes", "prior"):
        agreement_report_recompute(project=project, source=source)
    with django_capture_on_commit_callbacks(execute=True):
        claim_and_vote(api_for(alice))
    assert [args for args, _ in queued] == [(project.pk, "votes")]


def test_a_vote_is_taken_when_the_refresh_cannot_be_queued(
    project, alice, api_for, queued_pairs, monkeypatch, django_capture_on_commit_callbacks
):
    def broker_down(*args, **options):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.agreement_report_refresh, "apply_async", broker_down)
    agreement_report_recompute(project=project)
    with django_capture_on_commit_callbacks(execute=True):
        claim_and_vote(api_for(alice))
    assert alice.votes.count() == 1


def test_recompute_queues_a_refresh_now(project, carol, dave, api_for, queued):
    response = api_for(dave).post("/api/v1/projects/demo/agreement/?source=votes")
    assert response.status_code == 202
    assert [args for args, _ in queued] == [(project.pk, "votes")]
    assert "countdown" not in queued[0][1]


def test_recompute_answers_503_when_the_broker_is_down(project, carol, api_for, monkeypatch):
    def broker_down(*args, **options):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.agreement_report_refresh, "apply_async", broker_down)
    response = api_for(carol).post("/api/v1/projects/demo/agreement/")
    assert response.status_code == 503
    assert "report was not recomputed" in response.json()["detail"]


def test_a_real_worker_refreshes_the_report_once_for_votes_in_a_window(
    celery_worker_process, settings, project, api_for, alice, bob, dave
):
    settings.ARBITER_AGREEMENT_DEBOUNCE_S = 3
    PairFactory.create_batch(3, project=project, status="queued")
    served = api_for(dave).get("/api/v1/projects/demo/agreement/")
    assert served.json()["votes"] == 0
    worker = celery_worker_process(queues="releases", concurrency=1)
    claim_and_vote(api_for(alice))
    claim_and_vote(api_for(bob))
    deadline = time.monotonic() + 60
    report = AgreementReport.objects.get(project=project, source="all")
    while report.votes_seen < 2:
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.2)
        report.refresh_from_db()
    assert api_for(dave).get("/api/v1/projects/demo/agreement/").json()["votes"] == 2
    time.sleep(1)  # a second refresh, if one had been queued, would run about now
    refreshes = re.findall(
        r"Task annotation\.agreement_report_refresh\[.*\] succeeded", worker.log()
    )
    assert len(refreshes) == 1, worker.log()
