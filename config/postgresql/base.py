"""Django's PostgreSQL backend, with the connection health check (``CONN_HEALTH_CHECKS``)
made without a round trip on a persistent connection that finished a request less than
``TRUSTED_FOR_S`` ago (docs/operations.md, "Database connections").

Django's check is a ``SELECT 1`` before a request's first statement: a round trip on every
request, which on the annotators' hot path is one statement in eight. It exists for the
connection PostgreSQL dropped while it sat idle (a restart, a failover, a terminated
backend, a proxy's idle timeout). Each of those makes the server end its side, so the
client's socket turns readable while no query is running: a connection that answered a
moment ago is checked by polling its socket, and only one with something to read (the
server's farewell, or the end of the stream) pays for the ``SELECT 1``. One idle longer is
checked as Django checks it.
"""

from __future__ import annotations

import select
import time

from django.conf import settings
from django.core.signals import request_finished
from django.db import connections
from django.db.backends.postgresql import base

from config.local_postgres import LocalServer

# A connection idle longer than this gets Django's SELECT 1 before its next request.
TRUSTED_FOR_S = 1.0


def _socket_quiet(raw) -> bool:
    """Whether the idle connection's socket has nothing to read (the server said nothing)."""
    try:
        poller = select.poll()
        poller.register(raw.fileno(), select.POLLIN | select.POLLPRI)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


class DatabaseWrapper(base.DatabaseWrapper):
    # When the connection last finished a request without a database error (monotonic).
    answered_at: float | None = None

    def connect(self) -> None:
        self.answered_at = None
        super().connect()

    def get_new_connection(self, conn_params):
        _local_server_started()
        return super().get_new_connection(conn_params)

    def close_if_health_check_failed(self) -> None:
        raw = self.connection
        if (
            raw is not None
            and self.health_check_enabled
            and not self.health_check_done
            and self.answered_at is not None
            and time.monotonic() - self.answered_at < TRUSTED_FOR_S
            and _socket_quiet(raw)
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()


_local_server_checked = False


def _local_server_started() -> None:
    """With no DATABASE_URL, starts Arbiter's own server (var/postgres) before this process's
    first connection, when no other process has (config/local_postgres.py)."""
    global _local_server_checked
    if _local_server_checked or settings.ARBITER_LOCAL_POSTGRES is None:
        return
    LocalServer(settings.ARBITER_LOCAL_POSTGRES).start()
    _local_server_checked = True


def _requests_answered(**kwargs) -> None:
    """After Django's own end-of-request handler (``close_old_connections``, connected
    first), which closed a connection that had an error and failed its check: the ones left
    open, and not broken by a network error the driver saw, answered this request."""
    now = time.monotonic()
    for connection in connections.all(initialized_only=True):
        if isinstance(connection, DatabaseWrapper):
            raw = connection.connection
            healthy = raw is not None and not raw.closed and not raw.broken
            connection.answered_at = now if healthy else None


request_finished.connect(_requests_answered, dispatch_uid="arbiter-postgresql-answered")
