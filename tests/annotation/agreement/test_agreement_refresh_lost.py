"""A refresh of the agreement report asked for while the task broker was down is sent again
by Celery beat's sweep once the broker is back, so the page stops saying "refreshing" without
anyone voting or pressing Recompute (docs/agreement.md, "The cache and its refresh")."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from datetime import timedelta

import pytest
import redis
from django.urls import reverse
from django.utils import timezone

from annotation import tasks
from annotation.agreement import services as agreement_report
from annotation.agreement.services import (
    agreement_refreshes_send_lost,
    agreement_report_recompute,
)
from annotation.core.jobs import quarantine_reason
from annotation.models import AgreementReport
from config.celery import app
from tests.annotation.agreement.test_agreement_report_refresh import claim_and_vote
from tests.job_deaths import WorkerDied, die

QUARANTINED = quarantine_reason(2)


def _report(project, source: str, *, computed_s_ago: float, requested_s_ago: float | None):
    agreement_report_recompute(project=project, source=source)
    now = timezone.now()
    AgreementReport.objects.filter(project=project, source=source).update(
        computed_at=now - timedelta(seconds=computed_s_ago),
        refresh_requested_at=None
        if requested_s_ago is None
        else now - timedelta(seconds=requested_s_ago),
    )


@pytest.mark.django_db
def test_the_sweep_sends_again_only_the_refreshes_overdue(project, settings, monkeypatch):
    settings.ARBITER_AGREEMENT_DEBOUNCE_S = 30
    settings.ARBITER_RESUME_STALLED_EVERY_S = 60
    sent: list[tuple] = []
    monkeypatch.setattr(
        tasks.agreement_report_refresh,
        "apply_async",
        lambda args, **options: sent.append((tuple(args), options["countdown"])),
    )
    overdue = 30 + agreement_report.REQUEST_GAP_S + 60
    _report(project, "all", computed_s_ago=2 * overdue, requested_s_ago=overdue + 5)  # lost
    _report(project, "votes", computed_s_ago=2 * overdue, requested_s_ago=overdue - 5)  # not yet
    _report(project, "prior", computed_s_ago=overdue, requested_s_ago=overdue + 5)  # it ran

    assert agreement_refreshes_send_lost() == [(project.pk, "all")]
    # asked again as a vote asks: after the window, so the votes of the new one are covered
    assert sent == [((project.pk, "all"), 30 + agreement_report.REQUEST_GAP_S)]
    assert agreement_refreshes_send_lost() == []  # once: the request is new again
    assert len(sent) == 1


class _RedisServer:
    """A private redis-server on ``port``, to be stopped and started again."""

    def __init__(self, port: int) -> None:
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "the private redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


BROKER_KEYS = ("broker_url", "broker_read_url", "broker_write_url")


def _publish_to(urls: dict) -> None:
    """As tests/judges/test_broker_down.py: the app forgets its pools, so it publishes to the
    given broker from now on."""
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(urls)


@pytest.mark.redis
@pytest.mark.timeout(120)
@pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server")
def test_a_refresh_asked_for_while_redis_was_down_runs_once_it_is_back(
    celery_worker_process, project, alice, carol, api_for, client_for, queued_pairs, settings
):
    settings.ARBITER_AGREEMENT_DEBOUNCE_S = 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = _RedisServer(port)
    previous = {key: app.conf[key] for key in BROKER_KEYS}
    _publish_to(dict.fromkeys(BROKER_KEYS, server.url))
    try:
        agreement_report_recompute(project=project)  # someone has read the report
        server.stop()
        claim_and_vote(api_for(alice))  # taken; its refresh could not be sent
        page = reverse("agreement", args=[project.slug])
        row = AgreementReport.objects.get(project=project, source="all")
        assert row.refresh_requested_at > row.computed_at
        assert "refreshing" in client_for(carol).get(page).content.decode()

        server = _RedisServer(port)  # Redis is back; nobody votes or presses Recompute
        worker = celery_worker_process(
            queues="releases",
            concurrency=1,
            beat=True,
            extra_env={
                "CELERY_BROKER_URL": server.url,
                "ARBITER_AGREEMENT_DEBOUNCE_S": "0",
                "ARBITER_RESUME_STALLED_EVERY_S": "1",
            },
        )
        deadline = time.monotonic() + 90
        while "refreshing" in client_for(carol).get(page).content.decode():
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.2)
    finally:
        server.stop()
        _publish_to(previous)
    row = AgreementReport.objects.get(project=project, source="all")
    assert row.computed_at >= row.refresh_requested_at
    assert row.votes_seen == 1
    assert "annotation.agreement_refreshes_send_lost" in worker.log()


@pytest.mark.django_db
def test_a_refresh_killed_twice_is_quarantined_and_not_sent_again_until_recompute(
    project, settings, monkeypatch, client_for, carol
):
    settings.ARBITER_AGREEMENT_DEBOUNCE_S = 30
    settings.ARBITER_RESUME_STALLED_EVERY_S = 60
    overdue = 30 + agreement_report.REQUEST_GAP_S + 60
    _report(project, "all", computed_s_ago=2 * overdue, requested_s_ago=overdue + 5)
    refresh = {"args": (project.pk, "all")}
    monkeypatch.setattr(agreement_report, "agreement_report_build", die)
    for attempt in (1, 2):
        with pytest.raises(WorkerDied):
            tasks.agreement_report_refresh.apply(**refresh)
        assert AgreementReport.objects.get(source="all").attempts == attempt  # before the work
    monkeypatch.setattr(
        agreement_report,
        "agreement_report_build",
        lambda **kwargs: pytest.fail("a quarantined refresh ran"),
    )
    sent: list[tuple] = []
    monkeypatch.setattr(
        tasks.agreement_report_refresh, "apply_async", lambda args, **o: sent.append(args)
    )

    assert agreement_refreshes_send_lost() == [(project.pk, "all")]  # found, not sent

    assert sent == []
    report = AgreementReport.objects.get(source="all")
    assert report.refresh_error == QUARANTINED
    assert agreement_refreshes_send_lost() == []  # no longer lost: nobody sends it
    monkeypatch.undo()
    tasks.agreement_report_refresh.apply(**refresh)  # a vote's request: still no work
    page = client_for(carol).get(reverse("agreement", args=[project.slug]))
    assert f"Not refreshed: {QUARANTINED}" in page.content.decode()

    agreement_report.agreement_report_queue_refresh(project=project, source="all")  # Recompute
    report = AgreementReport.objects.get(source="all")
    assert (report.attempts, report.refresh_error) == (0, "")
    assert report.computed_at > timezone.now() - timedelta(seconds=60)
