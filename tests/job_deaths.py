"""A task's deliveries as a worker that dies under them leaves them, run inline: the first
and second deliveries of one message each count their attempt and die mid-work, and the
third is what the broker's redelivery (or a lost pool process's requeue) hands out next."""

from __future__ import annotations

import pytest

from annotation.core.broker import registered_task

MESSAGE = "killed-message"


class WorkerDied(BaseException):
    """Stands for a SIGKILL: not an ``Exception``, so it goes through Celery's tracer and
    none of the task's hooks (failure, return) runs, as none would in a killed process."""


def die(*args, **kwargs):
    raise WorkerDied


def deliver(task_name: str, *, kwargs: dict, dies: bool = False) -> None:
    """One delivery of the message ``MESSAGE`` of ``task_name``; ``dies``: its worker dies."""
    task = registered_task(task_name)
    if dies:
        with pytest.raises(WorkerDied):
            task.apply(kwargs=kwargs, task_id=MESSAGE)
    else:
        task.apply(kwargs=kwargs, task_id=MESSAGE)
