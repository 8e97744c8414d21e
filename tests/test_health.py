"""Liveness and readiness (config/health.py): /healthz answers without the database, /readyz
names what is down, with the broker and the database pointed at a closed port and the
storage at a folder that cannot be made."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from django.db import connections
from django.urls import reverse

from tests.celery_worker import database_url_for_tests
from tests.live_gunicorn import LiveGunicorn, free_port


@pytest.fixture
def database_down(monkeypatch):
    """New connections go to a port nobody listens on (the test's own stays open)."""
    monkeypatch.setitem(connections.settings["default"], "HOST", "127.0.0.1")
    monkeypatch.setitem(connections.settings["default"], "PORT", free_port())


def _broker_at(monkeypatch, url: str) -> None:
    """Publishing goes to ``url`` (Celery reads this variable before its own settings)."""
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", url)


def test_healthz_answers_without_asking_the_database(client, db, database_down):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_makes_no_query(client, db, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert client.get(reverse("healthz")).status_code == 200


def test_probes_are_answered_in_plain_http_where_pages_are_redirected(db):
    """A load balancer or Prometheus asks a node directly, behind the TLS proxy: the
    production settings under gunicorn, HTTPS redirect on."""
    env = {"DJANGO_SECURE_SSL_REDIRECT": "true", "ARBITER_METRICS_TOKEN": "probe-token"}
    with LiveGunicorn(database_url=database_url_for_tests(), extra_env=env) as server:
        assert httpx.get(f"{server.url}/login/").status_code == 301
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        assert httpx.get(f"{server.url}/readyz").status_code == 200, server.log()
        token = {"Authorization": "Bearer probe-token"}
        assert httpx.get(f"{server.url}/metrics", headers=token).status_code == 200


def test_readyz_is_ready_when_database_broker_and_storage_answer(client, db):
    response = client.get(reverse("readyz"))
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "broker": "ok",
        "storage": "ok",
        "down": [],
    }


def test_readyz_names_the_broker_on_a_closed_port(client, db, monkeypatch):
    _broker_at(monkeypatch, f"redis://127.0.0.1:{free_port()}/0")
    response = client.get(reverse("readyz"))
    assert response.status_code == 503
    body = response.json()
    assert (body["status"], body["down"], body["database"]) == ("error", ["broker"], "ok")
    assert body["broker"].startswith("error: ")
    assert "127.0.0.1" not in response.content.decode()  # the error's message stays out


def test_readyz_names_the_database_on_a_closed_port(client, db, database_down):
    response = client.get(reverse("readyz"))
    assert response.status_code == 503
    body = response.json()
    assert (body["down"], body["broker"], body["storage"]) == (["database"], "ok", "ok")
    assert body["database"] == "error: OperationalError"


def test_readyz_names_a_storage_folder_that_cannot_be_made(client, db, settings, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    settings.MEDIA_ROOT = tmp_path / "a-file" / "media"
    response = client.get(reverse("readyz"))
    assert response.status_code == 503
    assert response.json()["down"] == ["storage"]


def test_readyz_asks_the_bucket_when_files_live_in_one(client, db, s3_storage):
    response = client.get(reverse("readyz"))
    assert (response.status_code, response.json()["storage"]) == (200, "ok")


def test_readyz_names_a_bucket_that_does_not_answer(client, db, s3_storage, settings):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    settings.ARBITER_S3_ENDPOINT_URL = f"http://127.0.0.1:{port}"
    response = client.get(reverse("readyz"))
    assert response.status_code == 503
    assert response.json()["down"] == ["storage"]


def test_a_broker_that_never_answers_is_down_after_the_timeout(client, db, monkeypatch, settings):
    """A port that takes the connection and never says a word, as a hung host does."""
    settings.ARBITER_READY_TIMEOUT_S = 1
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        _broker_at(monkeypatch, f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        started = time.monotonic()
        response = client.get(reverse("readyz"))
        took = time.monotonic() - started
    finally:
        silent.close()
    assert response.status_code == 503
    assert response.json()["down"] == ["broker"]
    assert took < 3
