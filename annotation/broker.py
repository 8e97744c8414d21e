"""Sending tasks to the broker from a request: tried twice without a pause, then given up
(a Redis host that does not answer is given up after CELERY_BROKER_CONNECT_TIMEOUT_S), so a
broker that is down turns into a clear ``Unavailable`` error instead of a request that hangs
(docs/operations.md, "When the broker is down")."""

from __future__ import annotations

from typing import Any

from kombu.exceptions import OperationalError

from annotation.errors import Unavailable

PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}


def task_publish(task: Any, *, error: type[Unavailable] = Unavailable, **options: Any) -> None:
    """Sends ``task`` (``apply_async`` options in ``options``); raises ``error`` saying the
    task queue is unreachable when the broker cannot take it."""
    try:
        task.apply_async(retry=True, retry_policy=PUBLISH_RETRY_POLICY, **options)
    except OperationalError as exc:
        raise error(f"The task queue is unreachable ({exc}).") from exc
