"""The attempts of a job's task message, counted whatever the kind of job (annotation.core.jobs)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class TaskAttempt(models.Model):
    """One task message that started and has not returned: how many times a worker took it.
    The broker's redelivery and a lost pool process's requeue give the message back under
    its Celery task id, so a message whose worker dies under it counts up here; a task that
    returns (success, failure, retry) removes its row (``JobTask``)."""

    # The Celery task id and the retry number (a retry is a new message with the same id).
    key = models.CharField(max_length=300, primary_key=True)
    task = models.CharField(max_length=200, help_text="The task's registered name.")
    attempts = models.PositiveSmallIntegerField(default=0)
    last_attempt_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.task}[{self.key}]: {self.attempts} attempt(s)"
