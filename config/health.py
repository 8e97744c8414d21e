"""Liveness and readiness (docs/deploy.md, "Health"). ``/healthz`` says only that the process
answers, touching nothing else, so a database outage never gets every web node restarted;
``/readyz`` checks the database, the Celery broker and the file storage, each on a thread of
its own with ``ARBITER_READY_TIMEOUT_S``, and answers 503 naming what is down. A failure is
named by its exception type, never its message (which can hold a host or a password)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import connections
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.celery import app as celery_app

OK = "ok"


def check_database() -> None:
    """``SELECT 1`` on a connection of the checking thread's own, closed afterwards."""
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connections.close_all()


def check_broker() -> None:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(
            max_retries=1, interval_start=0, timeout=settings.ARBITER_READY_TIMEOUT_S
        )


def check_storage() -> None:
    """Where Arbiter writes its files (annotation/core/storage.py): on local disk each area's
    folder must be there (made when missing, as the first write would) and writable; in a
    bucket, one request asks whether a key exists (a missing key is an answer; an unreachable
    server or a refused credential is not)."""
    from annotation.core import storage

    if storage.is_s3():
        storage.exists("media", "readyz")
        return
    for area in storage.AREAS:
        location = storage.local_root(area)
        location.mkdir(parents=True, exist_ok=True)
        if not os.access(location, os.W_OK | os.X_OK):
            raise PermissionError(area)


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "broker": check_broker,
    "storage": check_storage,
}


def _run_checks(timeout: float) -> dict[str, str]:
    """Each check on a daemon thread, all at once: "ok", "error: <type>", or "timeout"."""
    results: dict[str, str] = {}

    def run(name: str, check: Callable[[], None]) -> None:
        try:
            check()
            results[name] = OK
        except Exception as exc:  # any failure is reported, not raised
            results[name] = f"error: {type(exc).__name__}"

    threads = [
        threading.Thread(target=run, args=item, daemon=True, name=f"readyz-{item[0]}")
        for item in CHECKS.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)  # the threads run together: all done within about one timeout
    return {name: results.get(name, "timeout") for name in CHECKS}


@require_GET
@never_cache
def healthz(request):
    """Liveness: the process answers. No database, broker or storage is asked."""
    return JsonResponse({"status": OK})


@require_GET
@never_cache
def readyz(request):
    """Readiness for a load balancer: 200 when the database, the broker and the storage
    answer, else 503 with ``down`` naming those that did not."""
    checks = _run_checks(settings.ARBITER_READY_TIMEOUT_S)
    down = [name for name, result in checks.items() if result != OK]
    body = {"status": "error" if down else OK, **checks, "down": down}
    return JsonResponse(body, status=503 if down else 200)
