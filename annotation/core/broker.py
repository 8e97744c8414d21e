"""Sending tasks to the broker from a request: tried twice without a pause, then given up
(a Redis host that does not answer is given up after CELERY_BROKER_CONNECT_TIMEOUT_S), so a
broker that is down turns into a clear ``Unavailable`` error instead of a request that hangs
(docs/operations.md, "When the broker is down"). The error says only that the task queue is
unreachable: the broker's own message names its host and port, which stay in the log.

A service names the task it sends (``registered_task``) rather than importing the task module,
which imports the services: the tasks sit above them, and nothing imports the tasks back."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, current_app
from kombu.exceptions import OperationalError

from annotation.core.errors import Unavailable

PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5}
BROKER_DOWN_MESSAGE = "The task queue is unreachable."

logger = logging.getLogger(__name__)


def registered_task(name: str) -> Task:
    """The task registered with the Celery app under ``name``. A process that has not loaded
    it yet (a web process, before its first send) imports the installed apps' task modules
    first, as a worker does when it starts. Sent through the task itself, not by name
    (``send_task``), so that it keeps its own options and runs in place when tasks are eager
    (``CELERY_TASK_ALWAYS_EAGER``, the tests)."""
    if name not in current_app.tasks:
        current_app.autodiscover_tasks(force=True)
    return current_app.tasks[name]


def task_publish(task: Any, *, error: type[Unavailable] = Unavailable, **options: Any) -> None:
    """Sends ``task`` (``apply_async`` options in ``options``); raises ``error`` saying the
    task queue is unreachable when the broker cannot take it, and logs the broker's reason."""
    try:
        task.apply_async(retry=True, retry_policy=PUBLISH_RETRY_POLICY, **options)
    except OperationalError as exc:
        logger.warning("The task queue refused %s: %s", getattr(task, "name", task), exc)
        raise error(BROKER_DOWN_MESSAGE) from exc
