"""A persistent database connection that PostgreSQL dropped (a restart, a failover, an idle
timeout) is replaced before a request uses it: CONN_HEALTH_CHECKS (docs/operations.md,
"Database connections"). Without it, the first request on each such connection failed with
a 500."""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest
from django.core.signals import request_finished, request_started
from django.db import connection, connections
from rest_framework.authtoken.models import Token

from config.postgresql import base as postgresql_base
from tests.celery_worker import database_url_for_tests
from tests.factories import UserFactory
from tests.live_gunicorn import LiveGunicorn

APPLICATION_NAME = "arbiter-reconnect-test"
PERSISTENT_S = "600"
TERMINATION_TIMEOUT_S = 10


def terminate_server_connections(application_name: str) -> int:
    """Ends the server side of every connection with this name, from our own connection, and
    waits until PostgreSQL has let them go; returns how many there were."""
    query = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
    with connection.cursor() as cursor:
        cursor.execute(query, [application_name])
        terminated = len(cursor.fetchall())
        deadline = time.monotonic() + TERMINATION_TIMEOUT_S
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                [application_name],
            )
            if cursor.fetchone()[0] == 0:
                return terminated
            time.sleep(0.1)
    raise AssertionError(f"connections named {application_name} outlived pg_terminate_backend")


@pytest.mark.django_db(transaction=True)
def test_request_after_postgresql_dropped_the_connection_succeeds():
    token = Token.objects.create(user=UserFactory(username="reconnecting"))
    database_url = f"{database_url_for_tests()}?application_name={APPLICATION_NAME}"
    env = {"DATABASE_CONN_MAX_AGE": PERSISTENT_S}
    with (
        LiveGunicorn(database_url=database_url, extra_env=env) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": f"Token {token.key}"}, timeout=30
        ) as api,
    ):
        assert api.get("/api/v1/projects/").status_code == 200
        assert terminate_server_connections(APPLICATION_NAME) == 1
        for _ in range(2):
            response = api.get("/api/v1/projects/")
            assert response.status_code == 200, (response.text[:500], server.log())


def _persistent_checked_connection(monkeypatch):
    """The default connection, opened again as production keeps it: persistent, with
    health checks."""
    db = connections["default"]
    db.close()
    monkeypatch.setitem(db.settings_dict, "CONN_HEALTH_CHECKS", True)
    db.ensure_connection()
    db.close_at = None  # kept between requests (CONN_MAX_AGE)
    return db


def _checks_made(monkeypatch, db) -> list[int]:
    """Counts Django's SELECT 1 checks on ``db``."""
    made: list[int] = []
    usable = type(db).is_usable

    def counting(self):
        made.append(1)
        return usable(self)

    monkeypatch.setattr(type(db), "is_usable", counting)
    return made


def _next_request(db) -> None:
    """What Django does between two requests: the end of one, the start of the next, and
    the next one's first statement (which runs the health check)."""
    request_finished.send(sender=None)
    request_started.send(sender=None)
    with db.cursor() as cursor:
        cursor.execute("SELECT 2")


@pytest.mark.django_db(transaction=True)
def test_a_connection_that_answered_a_moment_ago_is_checked_without_a_round_trip(monkeypatch):
    """config/postgresql/base.py: no SELECT 1 while the connection answered less than
    TRUSTED_FOR_S ago and its socket is quiet; the SELECT 1 once it sat idle longer, or when
    the server has said something (here a notification, which a quiet socket never holds)."""
    db = _persistent_checked_connection(monkeypatch)
    assert isinstance(db, postgresql_base.DatabaseWrapper)
    made = _checks_made(monkeypatch, db)
    _next_request(db)
    _next_request(db)
    assert made == []
    clock = time.monotonic()
    later = clock + postgresql_base.TRUSTED_FOR_S + 5
    with monkeypatch.context() as idle:
        idle.setattr(postgresql_base.time, "monotonic", lambda: later)
        request_started.send(sender=None)
        with db.cursor() as cursor:
            cursor.execute("SELECT 2")
    assert made == [1]
    _next_request(db)
    assert made == [1]
    with db.cursor() as cursor:
        cursor.execute("LISTEN arbiter_reconnect_test")
    # From another session: the server writes it to our socket while we are idle.
    with psycopg.connect(**db.get_connection_params(), autocommit=True) as other:
        other.execute("NOTIFY arbiter_reconnect_test")
    deadline = time.monotonic() + TERMINATION_TIMEOUT_S
    while postgresql_base._socket_quiet(db.connection):
        assert time.monotonic() < deadline, "the notification never reached the socket"
        time.sleep(0.01)
    _next_request(db)
    assert made == [1, 1]
    db.close()
