"""Recompute is limited to one queued refresh per project and source (docs/agreement.md,
"The cache and its refresh"): thirty presses while the worker has not run the first queue
one task, the others answer 409 saying so; once it ran, or after RECOMPUTE_PENDING_S, the
next one is queued. The broker refusing it leaves no stamp behind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from annotation import tasks
from annotation.agreement.services import RECOMPUTE_PENDING_S, agreement_report_recompute
from annotation.models import AgreementReport

pytestmark = pytest.mark.django_db

API = "/api/v1/projects/demo/agreement/"


@pytest.fixture
def queued(monkeypatch):
    """The refreshes queued, as their arguments, left waiting for a worker."""
    calls: list[tuple] = []
    monkeypatch.setattr(
        tasks.agreement_report_refresh,
        "apply_async",
        lambda args, **options: calls.append(tuple(args)),
    )
    return calls


def test_thirty_recomputes_queue_one_refresh_until_it_has_run(
    project, carol, dave, api_for, client_for, queued
):
    agreement_report_recompute(project=project)
    api = api_for(dave)
    answers = [api.post(API).status_code for _ in range(30)]
    assert answers == [202] + [409] * 29
    assert queued == [(project.pk, "all")]
    refused = api.post(API)
    assert "queued already" in refused.json()["detail"]
    page = client_for(carol).post(reverse("agreement-recompute", args=["demo"]), {"source": "all"})
    assert page.status_code == 409
    assert "queued already" in page.content.decode()
    # Another source's report has its own refresh.
    agreement_report_recompute(project=project, source="votes")
    assert api.post(f"{API}?source=votes").status_code == 202

    agreement_report_recompute(project=project)  # the worker ran the queued one
    assert api.post(API).status_code == 202
    AgreementReport.objects.filter(source="all").update(
        recompute_requested_at=timezone.now() - timedelta(seconds=RECOMPUTE_PENDING_S + 1)
    )  # the one queued then never ran (a lost task): another may be queued
    assert api.post(API).status_code == 202
    assert queued == [(project.pk, "all"), (project.pk, "votes")] + [(project.pk, "all")] * 2


def test_a_recompute_the_broker_refused_does_not_hold_back_the_next(
    project, carol, api_for, monkeypatch, queued
):
    agreement_report_recompute(project=project)
    queue = tasks.agreement_report_refresh.apply_async

    def broker_down(*args, **options):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.agreement_report_refresh, "apply_async", broker_down)
    assert api_for(carol).post(API).status_code == 503
    assert AgreementReport.objects.get(source="all").recompute_requested_at is None
    monkeypatch.setattr(tasks.agreement_report_refresh, "apply_async", queue)
    assert api_for(carol).post(API).status_code == 202
    assert queued == [(project.pk, "all")]
