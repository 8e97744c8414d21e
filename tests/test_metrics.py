"""/metrics (config/metrics.py): refused without the operator's token, and read after a claim
and a vote, parsed with prometheus-client's own parser, with the counters moved; several
gunicorn workers counted together; a Celery worker's job metrics on its own port."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connections
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.authtoken.models import Token

from annotation.models import Pair, Role
from config.queues import QUEUES, RELEASES
from tests.celery_worker import database_url_for_tests
from tests.factories import MembershipFactory, PairFactory
from tests.live_gunicorn import LiveGunicorn, free_port

TOKEN = "metrics-test-token"


def samples(text: str) -> dict[tuple, float]:
    """Every sample of an exposition as {(name, ((label, value), ...)): value}."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict[tuple, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def scrape(client, settings):
    settings.ARBITER_METRICS_TOKEN = TOKEN

    def read() -> dict[tuple, float]:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=")
        return samples(response.content.decode())

    return read


def test_an_anonymous_or_wrong_token_request_is_refused(client, db, settings):
    settings.ARBITER_METRICS_TOKEN = TOKEN
    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    assert b"arbiter_" not in anonymous.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer guess").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=TOKEN).status_code == 401


def test_without_a_token_set_there_are_no_metrics(client, db, settings):
    settings.ARBITER_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_claim_and_a_vote_move_their_counters_and_the_pairs_by_state(
    project, alice, api_for, scrape
):
    PairFactory.create_batch(2, project=project, status="queued")
    api = api_for(alice)
    before = scrape()

    claimed = api.post(f"/api/v1/projects/{project.slug}/claim/")
    assert claimed.status_code == 200
    after_claim = scrape()
    assert value(after_claim, "arbiter_claims_total", outcome="new") == (
        value(before, "arbiter_claims_total", outcome="new") + 1
    )
    assert value(after_claim, "arbiter_pairs", state="annotating") == 1
    assert value(after_claim, "arbiter_pairs", state="queued") == 1

    voted = api.post(f"/api/v1/assignments/{claimed.json()['id']}/vote/", {"choice": "left"})
    assert voted.status_code == 201
    assert api.post(f"/api/v1/assignments/{claimed.json()['id']}/vote/", {"choice": "left"})
    after_vote = scrape()
    assert value(after_vote, "arbiter_votes_total", kind="counted") == (
        value(before, "arbiter_votes_total", kind="counted") + 1  # the repeat is not counted
    )
    latency = "django_http_requests_latency_seconds_by_view_method_count"
    assert value(after_vote, latency, view="api-claim", method="POST") >= 1
    assert Pair.objects.filter(status="annotating").count() == value(
        after_vote, "arbiter_pairs", state="annotating"
    )


def test_the_queues_depths_are_read_from_the_broker(db, scrape):
    found = scrape()
    assert value(found, "arbiter_broker_up") == 1
    for queue in QUEUES:
        assert ("arbiter_queue_depth", (("queue", queue),)) in found


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_message_waiting_on_redis_is_counted_on_its_queue(
    celery_worker_process, scrape, tmp_path
):
    from config.celery import app

    waiting = value(scrape(), "arbiter_queue_depth", queue=RELEASES)
    app.send_task("annotation.tasks.release_build_run", args=[0], queue=RELEASES)
    assert value(scrape(), "arbiter_queue_depth", queue=RELEASES) == waiting + 1
    # and a worker on that queue takes it, which its own metrics count
    port = free_port()
    celery_worker_process(
        queues=RELEASES,
        concurrency=1,
        extra_env={
            "ARBITER_WORKER_METRICS_PORT": str(port),
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        },
    )
    deadline = time.monotonic() + 60
    done = "arbiter_job_duration_seconds_count"
    labels = {"task": "annotation.tasks.release_build_run", "queue": RELEASES}
    while time.monotonic() < deadline:
        try:
            worker = samples(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
        except httpx.TransportError:
            worker = {}
        if value(worker, done, state="SUCCESS", **labels) == 1:
            break
        time.sleep(0.3)
    assert value(worker, done, state="SUCCESS", **labels) == 1
    assert value(scrape(), "arbiter_queue_depth", queue=RELEASES) == 0


def _annotate(url: str, slug: str, key: str, votes: int) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {key}"}) as api:
        for _ in range(votes):
            claimed = api.post(f"/api/v1/projects/{slug}/claim/").json()
            vote = api.post(f"/api/v1/assignments/{claimed['id']}/vote/", json={"choice": "tie"})
            assert vote.status_code == 201, vote.text


@pytest.mark.django_db(transaction=True)
def test_several_gunicorn_workers_are_counted_together(project, alice, bob, tmp_path):
    """Three annotators at once on three workers, each counting in its own process, summed
    through the shared folder."""
    PairFactory.create_batch(12, project=project, status="queued")
    third = MembershipFactory(project=project, role=Role.ANNOTATOR).user
    keys = [Token.objects.create(user=user).key for user in (alice, bob, third)]
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {"ARBITER_METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    connections.close_all()
    with LiveGunicorn(database_url=database_url_for_tests(), extra_env=env, workers=3) as server:
        with ThreadPoolExecutor(3) as pool:
            for done in [pool.submit(_annotate, server.url, project.slug, k, 4) for k in keys]:
                done.result()
        found = samples(
            httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
        )
        pids = {path.name.rsplit("_", 1)[-1] for path in folder.iterdir()}
    assert value(found, "arbiter_votes_total", kind="counted") == 12
    assert value(found, "arbiter_claims_total", outcome="new") == 12
    assert len(pids) > 1  # more than one worker process wrote its counts
