"""The task broker goes down: starting or resuming a filter run answers 503 with a message on
the page and the API, fails fast, and leaves nothing stuck (docs/judges-runs.md, "Broker down").

The broker is a private Redis server that the test starts and then shuts down; the shared one
stays up."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
import redis
from django.urls import reverse

from annotation.models import PairStatus
from config.celery import app
from judges.models import FilterRun
from tests.conftest import requires_redis
from tests.factories import PairFactory
from tests.judges.scripted import canonical, make_judges, use_scripted_judges

pytestmark = [
    pytest.mark.redis,
    requires_redis(),
    pytest.mark.skipif(not shutil.which("redis-server"), reason="needs redis-server"),
    pytest.mark.django_db(transaction=True),  # the start is published after the commit
]

# Well under a request's patience: the publish retries once, briefly.
FAIL_FAST_S = 5


class PrivateRedis:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
        )
        self.client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "the private redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


BROKER_KEYS = ("broker_url", "broker_read_url", "broker_write_url")


def _point_celery_at(urls: dict) -> None:
    """Publishes to the given broker from now on. The app forgets its pools, and kombu's pool
    registry (keyed by broker URL) hands it the given broker's; none is closed, since the
    registry would keep handing out a closed one."""
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(urls)


@pytest.fixture
def broker():
    """A private Redis the web process publishes to, tasks not run inline; ``.stop()`` it."""
    server = PrivateRedis()
    previous = {key: app.conf[key] for key in (*BROKER_KEYS, "task_always_eager")}
    _point_celery_at({**dict.fromkeys(BROKER_KEYS, server.url), "task_always_eager": False})
    yield server
    server.stop()
    _point_celery_at(previous)


@pytest.fixture
def judges(monkeypatch):
    use_scripted_judges(monkeypatch, {"steady": canonical("A")})
    return make_judges("steady")


def _timed(call):
    started = time.monotonic()
    response = call()
    assert time.monotonic() - started < FAIL_FAST_S
    return response


def test_starting_a_run_with_the_broker_down_answers_503_and_returns_its_pairs(
    project, carol, judges, client_for, api_for, broker, caplog
):
    pairs = PairFactory.create_batch(3, project=project)
    page = client_for(carol)
    api = api_for(carol)
    start_url = reverse("judges:runs", args=[project.slug])
    api_url = f"/api/v1/projects/{project.slug}/filter-runs/"

    # while the broker is up the start message lands on it
    up = api.post(api_url, {"judges": ["steady"], "pairs": [pairs[0].external_id]}, format="json")
    assert up.status_code == 201
    assert broker.client.llen("judges_http") == 1

    broker.stop()
    response = _timed(lambda: page.post(start_url, {"judges": [judges[0].pk], "threshold": 0.9}))
    assert response.status_code == 503
    run = FilterRun.objects.exclude(number=up.data["id"]).get()  # the API's id is the number
    assert run.status == FilterRun.Status.FAILED
    assert "task queue is unreachable" in run.error
    assert "imported again" in run.error
    body = response.content.decode()
    assert f"Filter run {run.number} failed" in body
    assert "Try again once the task queue" in body
    assert set(run.pairs.values_list("status", flat=True)) == {PairStatus.IMPORTED}

    response = _timed(lambda: api.post(api_url, {"judges": ["steady"]}, format="json"))
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert list(response.json()) == ["detail"]
    assert "task queue is unreachable" in response.json()["detail"]
    # where the broker is stays in the log: the answers and the run say only that it is down
    for text in (body, response.json()["detail"], run.error):
        assert str(broker.port) not in text, text
        assert "127.0.0.1" not in text, text
    assert any(str(broker.port) in record.getMessage() for record in caplog.records)
    assert FilterRun.objects.filter(status=FilterRun.Status.FAILED).count() == 2
    # nothing stuck in "judging": the run that did start keeps only its own pair
    statuses = dict(project.pairs.values_list("pk", "status"))
    assert statuses.pop(pairs[0].pk) == PairStatus.JUDGING
    assert set(statuses.values()) == {PairStatus.IMPORTED}


def test_resuming_a_run_with_the_broker_down_answers_503_and_changes_nothing(
    project, carol, judges, client_for, api_for, broker
):
    PairFactory.create_batch(2, project=project)
    api = api_for(carol)
    created = api.post(
        f"/api/v1/projects/{project.slug}/filter-runs/", {"judges": ["steady"]}, format="json"
    )
    assert created.status_code == 201
    run = FilterRun.objects.get(project=project, number=created.data["id"])
    FilterRun.objects.filter(pk=run.pk).update(status=FilterRun.Status.FAILED, error="Boom")
    before = FilterRun.objects.filter(pk=run.pk).values().get()

    broker.stop()
    resume = reverse("judges:run-resume", args=[project.slug, run.number])
    response = _timed(lambda: client_for(carol).post(resume))
    assert response.status_code == 503
    assert "task queue is unreachable" in response.content.decode()
    assert f"Run {run.number} was not resumed" in response.content.decode()
    assert FilterRun.objects.filter(pk=run.pk).values().get() == before

    response = _timed(
        lambda: api.post(f"/api/v1/projects/{project.slug}/filter-runs/{run.number}/resume/")
    )
    assert response.status_code == 503
    assert f"Run {run.number} was not resumed" in response.json()["detail"]
    assert FilterRun.objects.filter(pk=run.pk).values().get() == before
    assert set(run.pairs.values_list("status", flat=True)) == {PairStatus.JUDGING}
