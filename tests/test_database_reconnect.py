"""A persistent database connection that PostgreSQL dropped (a restart, a failover, an idle
timeout) is replaced before a request uses it: CONN_HEALTH_CHECKS (docs/operations.md,
"Database connections"). Without it, the first request on each such connection failed with
a 500."""

from __future__ import annotations

import time

import httpx
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.celery_worker import database_url_for_tests
from tests.conftest import requires_postgres
from tests.factories import UserFactory
from tests.live_gunicorn import LiveGunicorn

pytestmark = [requires_postgres(), pytest.mark.postgres]

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
