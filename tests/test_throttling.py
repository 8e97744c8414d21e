"""Per-token rate limits (config/throttling.py, docs/api.md "Rate limits"): a token past its
rate gets 429 with Retry-After; another token, and the annotator's loop with its own rate,
are counted apart; a malformed rate setting stops the start; several web processes count
together in Redis."""

from __future__ import annotations

import os

import httpx
import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from rest_framework.authtoken.models import Token

from config.env import env_rate
from config.throttling import THROTTLE_CACHE
from tests.celery_worker import database_url_for_tests
from tests.conftest import requires_redis
from tests.live_gunicorn import LiveGunicorn

PROJECTS = "/api/v1/projects/"


@pytest.fixture(autouse=True)
def _fresh_counts():
    caches[THROTTLE_CACHE].clear()
    yield
    caches[THROTTLE_CACHE].clear()


def test_a_token_past_its_rate_gets_429_with_retry_after(api_for, alice, bob, settings):
    settings.ARBITER_API_THROTTLE_RATE = "3/min"
    api = api_for(alice)
    assert [api.get(PROJECTS).status_code for _ in range(3)] == [200, 200, 200]
    refused = api.get(PROJECTS)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"].lower()
    assert api_for(bob).get(PROJECTS).status_code == 200  # bob's token has its own count


def test_a_browser_session_is_counted_per_user(client_for, alice, settings):
    settings.ARBITER_API_THROTTLE_RATE = "2/min"
    client = client_for(alice)
    assert [client.get(PROJECTS).status_code for _ in range(3)] == [200, 200, 429]


def test_the_annotators_loop_has_its_own_rate(api_for, alice, project, queued_pairs, settings):
    settings.ARBITER_API_THROTTLE_RATE = "1/min"
    settings.ARBITER_API_THROTTLE_ANNOTATE_RATE = "3/min"
    api = api_for(alice)
    claim = f"/api/v1/projects/{project.slug}/claim/"
    first = api.post(claim)
    assert first.status_code == 200
    vote = api.post(
        f"/api/v1/assignments/{first.json()['id']}/vote/",
        {"choice": "left", "next": True},
        format="json",
    )
    assert vote.status_code == 201, vote.content  # the general rate (1/min) is not used here
    assert api.post(claim).status_code == 200
    refused = api.post(claim)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert api.get(PROJECTS).status_code == 200  # the rest of the API counts apart


def test_no_rate_means_no_limit(api_for, alice, settings):
    settings.ARBITER_API_THROTTLE_RATE = None
    api = api_for(alice)
    assert {api.get(PROJECTS).status_code for _ in range(20)} == {200}


@pytest.mark.parametrize("value", ["600", "0/min", "10/week", "many/s", "-1/s"])
def test_a_malformed_rate_is_refused_at_start(monkeypatch, value):
    monkeypatch.setenv("ARBITER_API_THROTTLE_RATE", value)
    with pytest.raises(ImproperlyConfigured, match="ARBITER_API_THROTTLE_RATE"):
        env_rate("ARBITER_API_THROTTLE_RATE", "1200/min")


@pytest.mark.parametrize(("value", "rate"), [("off", None), ("600/min", "600/min"), ("5/S", "5/s")])
def test_a_rate_setting_is_read(monkeypatch, value, rate):
    monkeypatch.setenv("ARBITER_API_THROTTLE_RATE", value)
    assert env_rate("ARBITER_API_THROTTLE_RATE", "1200/min") == rate


@requires_redis()
def test_several_web_processes_share_the_counts_through_redis(transactional_db, alice, project):
    """Two gunicorn workers, each request on a new connection: with the counts in Redis the
    token gets its rate once, not once per worker."""
    key = Token.objects.create(user=alice).key
    env = {
        "ARBITER_API_THROTTLE_RATE": "3/min",
        "ARBITER_API_THROTTLE_REDIS_URL": os.environ["CELERY_BROKER_URL"],
    }
    connections.close_all()
    with LiveGunicorn(database_url=database_url_for_tests(), extra_env=env, workers=2) as server:
        statuses = [
            httpx.get(server.url + PROJECTS, headers={"Authorization": f"Token {key}"}).status_code
            for _ in range(10)
        ]
    assert statuses.count(200) == 3, statuses
    assert statuses.count(429) == 7
