"""Sending tasks to the broker from a request: tried twice without a pause, then given up
(a Redis host that does not answer is given up after CELERY_BROKER_CONNECT_TIMEOUT_S), so a
broker that is down turns into a clear ``Unavailable`` error instead of a request that hangs
(docs/operations.md, "When the broker is down"). The error says only that the task queue is
unreachable: the broker's own message names its host and port, which stay in the log."""

from __future__ import annotations

import logging
from typing import Any

from kombu.exceptions import OperationalError

from annotation.core.errors import Unavailable

PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}
BROKER_DOWN_MESSAGE = "The task queue is unreachable."

logger = logging.getLogger(__name__)


def task_publish(task: Any, *, error: type[Unavailable] = Unavailable, **options: Any) -> None:
    """Sends ``task`` (``apply_async`` options in ``options``); raises ``error`` saying the
    task queue is unreachable when the broker cannot take it, and logs the broker's reason."""
    try:
        task.apply_async(retry=True, retry_policy=PUBLISH_RETRY_POLICY, **options)
    except OperationalError as exc:
        logger.warning("The task queue refused %s: %s", getattr(task, "name", task), exc)
        raise error(BROKER_DOWN_MESSAGE) from exc
