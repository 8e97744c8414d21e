"""A pytest plugin loaded before pytest-django sets Django up (``-p`` in pyproject), so the
suite runs with ``ARBITER_ENV=test``: eager Celery tasks, fast password hashing. What the
platform keeps under ``var/`` (the file-system broker's folders, media, checkpoints) goes to
a folder of this test session instead, removed at its end, so the suite writes nothing into
the checkout; the workers and servers the tests start inherit it.

Under pytest-xdist (``make test`` runs two processes) each process has its own test database
(pytest-django names it after the process), its own folder for ``var/`` and its own Redis
database: the Celery workers a test starts would otherwise take the other process's tasks, on
the other database.

With no ``DATABASE_URL`` (a fresh clone's ``make test``), the session starts a PostgreSQL of
its own in a temporary folder (config/local_postgres.py, docs/database.md) before pytest-xdist
starts its processes, which inherit its URL, and removes it at the end."""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from config.local_postgres import LocalServer, throwaway_server

os.environ.setdefault("ARBITER_ENV", "test")


def _redis_database_for(url: str, worker: str) -> str:
    """``redis://host:port/N`` moved to database N + 1 + the xdist worker's number (gw0 is
    the first), so no two processes of one run share a broker."""
    match = re.fullmatch(r"(rediss?://[^/]+)(?:/(\d*))?", url)
    if match is None:
        return url
    base = int(match.group(2) or 0)
    number = int(worker.removeprefix("gw"))
    return f"{match.group(1)}/{(base + 1 + number) % 16}"


_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

_SESSION_SERVER: LocalServer | None = None
if not os.environ.get("DATABASE_URL") and not _WORKER:
    _SESSION_SERVER = throwaway_server()
    os.environ["DATABASE_URL"] = _SESSION_SERVER.url()
if _WORKER.startswith("gw") and "CELERY_BROKER_URL" in os.environ:
    os.environ["CELERY_BROKER_URL"] = _redis_database_for(os.environ["CELERY_BROKER_URL"], _WORKER)

_SESSION_VAR_DIR = None
if "ARBITER_VAR_DIR" not in os.environ:
    _SESSION_VAR_DIR = tempfile.mkdtemp(prefix="arbiter-tests-var-")
    os.environ["ARBITER_VAR_DIR"] = _SESSION_VAR_DIR

if _WORKER.startswith("gw"):  # each process its own var/ (the file-system broker's folders)
    os.environ["ARBITER_VAR_DIR"] = os.path.join(os.environ["ARBITER_VAR_DIR"], _WORKER)
    os.makedirs(os.environ["ARBITER_VAR_DIR"], exist_ok=True)


def pytest_unconfigure(config) -> None:
    if _SESSION_SERVER is not None:
        _SESSION_SERVER.remove()
    if _SESSION_VAR_DIR is not None:
        shutil.rmtree(_SESSION_VAR_DIR, ignore_errors=True)
