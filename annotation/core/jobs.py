"""The life of a background job, written once for every kind (imports, release builds,
agreement refreshes, filter runs, judge evaluations, trainings):

- ``job_publish`` sends a job's task, named as it is registered (``annotation.core.broker.
  registered_task``), once the current transaction commits (at once outside one), through
  ``annotation.core.broker``'s bounded retry; a broker that cannot take it becomes
  ``BrokerUnavailable`` (an ``Unavailable``), after the kind has recorded what that means
  for its job (``on_refused``);
- ``JobTask``, the base of every task that works on a job, records the task's final failure
  on the job, on a new database connection when the old one was lost
  (``annotation.failures``), a time limit's in words (``time_limits``: soft and hard
  limits by kind, ``ARBITER_TASK_TIME_LIMITS``);
- attempts are counted in the database before any work: ``JobTask`` counts each delivery
  of its message (``task_attempt_claim``), and a kind whose sweep sends a job again counts
  its runs on the job's row (``job_attempt_claim``); a job started
  ``ARBITER_JOB_MAX_ATTEMPTS`` times without finishing (its worker was killed each time) is
  quarantined: failed with ``quarantine_reason``, and never sent again, neither by its
  sweep nor by the broker's redelivery (docs/operations.md, "Time limits, attempts and
  quarantine");
- ``StalledJobs`` is the stalled-job sweep: a kind says how its stalled jobs are found,
  claimed and recovered, and ``sweep_task`` registers it as the Celery beat task named in
  ``CELERY_BEAT_SCHEDULE`` (docs/operations.md, "The scheduler").

A kind in ``judges`` registers here like any other; this module imports no feature."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, Literal, TypedDict, TypeVar

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from annotation.core.broker import registered_task, task_publish
from annotation.core.errors import Unavailable
from annotation.core.failures import record_failure
from annotation.models import TaskAttempt

logger = logging.getLogger(__name__)

Job = TypeVar("Job")


class BrokerUnavailable(Unavailable):
    """The task broker refused a job's message; the message says what was done about it."""


# What a refusal does once the kind has recorded it on its job: "raise" raises it, to the
# caller or from the commit; "log_at_commit" raises it to a caller outside a transaction but
# only logs it when it comes at the commit (the caller has moved on); "log" only logs it (the
# job's page says it failed).
Refusal = Literal["raise", "log_at_commit", "log"]


def job_publish(
    task: Any,
    *,
    on_refused: Callable[[BrokerUnavailable], None] | None = None,
    refusal: Refusal = "raise",
    after_commit: bool = True,
    **options: Any,
) -> None:
    """Sends ``task`` (its registered name, or the task itself; ``apply_async`` options in
    ``options``) once the current transaction commits, or at once outside one (or when
    ``after_commit`` is false: a task sent by a task or a sweep). When the broker cannot
    take it, ``on_refused(error)`` records that on the job (it may raise a
    ``BrokerUnavailable`` that says more), and the error is raised or logged as ``refusal``
    says."""
    if isinstance(task, str):
        task = registered_task(task)

    def send(*, at_commit: bool) -> None:
        try:
            task_publish(task, error=BrokerUnavailable, **options)
        except BrokerUnavailable as exc:
            if on_refused is not None:
                on_refused(exc)
            if refusal == "raise" or (refusal == "log_at_commit" and not at_commit):
                raise
            logger.warning("%s not queued: %s", getattr(task, "name", task), exc)

    if after_commit and transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: send(at_commit=True))
    else:
        send(at_commit=False)


class JobStopped(Exception):
    """A job stopped by the platform, not by its own error (it ran past its time limit);
    the message is the reason its page shows."""


# Raised inside a task that ran past its soft time limit; a service that records its own
# failures lets it through, so that the task records it in words (``JobTask``).
TIME_LIMIT_ERRORS = (SoftTimeLimitExceeded, TimeLimitExceeded)


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hour{'s' if seconds != 3600 else ''}"
    if seconds % 60 == 0:
        return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


class TimeLimits(TypedDict):
    soft_time_limit: int
    time_limit: int


def time_limits(kind: str) -> TimeLimits:
    """The Celery options ``soft_time_limit`` and ``time_limit`` of a task of ``kind`` (a
    key of ``ARBITER_TASK_TIME_LIMITS``): the hard limit, which kills the process, comes
    ``ARBITER_TASK_KILL_AFTER_S`` after the soft one, which raises inside the task."""
    soft, _ = settings.ARBITER_TASK_TIME_LIMITS[kind]
    return {"soft_time_limit": soft, "time_limit": soft + settings.ARBITER_TASK_KILL_AFTER_S}


def time_limit_reason(kind: str) -> str:
    """What a job of ``kind`` stopped by its time limit says, naming the setting."""
    soft, name = settings.ARBITER_TASK_TIME_LIMITS[kind]
    return f"Took longer than {_duration(soft)}, the {kind} limit ({name})."


def quarantine_reason(attempts: int) -> str:
    """What a quarantined job says: its worker never came back from it."""
    return (
        f"Stopped after {attempts} attempt{'s' if attempts != 1 else ''}: the worker was "
        "killed while running it (out of memory or killed)."
    )


def job_attempt_claim(jobs: QuerySet, **changes: Any) -> bool:
    """Counts one more attempt of the job in ``jobs`` (its row, filtered to the states a run
    may start from), with ``changes`` (its move to running, say), unless it has had
    ``ARBITER_JOB_MAX_ATTEMPTS`` already; true when it did. Called outside a transaction,
    the count is committed before the work starts, so a worker killed by the work cannot
    take it back. The model has ``attempts`` and ``last_attempt_at``."""
    return bool(
        jobs.filter(attempts__lt=settings.ARBITER_JOB_MAX_ATTEMPTS).update(
            attempts=F("attempts") + 1, last_attempt_at=timezone.now(), **changes
        )
    )


def job_attempts_spent(attempts: int) -> bool:
    """A job started this many times is quarantined rather than run or sent again."""
    return attempts >= settings.ARBITER_JOB_MAX_ATTEMPTS


def task_attempt_claim(*, key: str, task: str) -> int:
    """Counts one more start of the task message ``key`` (committed at once, outside a
    transaction) and returns its number, or 0 when it had ``ARBITER_JOB_MAX_ATTEMPTS``
    already: its worker died under it each time, and it is to be quarantined."""
    TaskAttempt.objects.get_or_create(key=key, defaults={"task": task})
    message = TaskAttempt.objects.filter(key=key)
    if not job_attempt_claim(message):
        return 0
    return message.values_list("attempts", flat=True).get()


def task_attempt_forget(*, task_id: str) -> None:
    """The task ``task_id`` returned (it succeeded, failed, was retried, ran past its hard
    limit, was quarantined): no death of its messages to count any more."""
    TaskAttempt.objects.filter(key__startswith=f"{task_id}:").delete()


class JobTask(Task):
    """Acknowledged after its work. A pool process killed under it (out of memory) gives
    the message back once (``reject_on_worker_lost``), and a whole worker killed leaves it
    to the broker's redelivery; either way the message's attempts, counted in the database
    before any work (``task_attempt_claim``), say whether it runs again: one taken
    ``ARBITER_JOB_MAX_ATTEMPTS`` times already is quarantined, its job failed with
    ``quarantine_reason``, and acknowledged. Its final failure is recorded on the job whose
    id is the argument ``job_id_arg`` (or the first positional one), through the kind's
    ``job_fail``; a time limit as ``JobStopped`` saying which (``time_limit_kind``, a key
    of ``ARBITER_TASK_TIME_LIMITS``)."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    job_id_arg: ClassVar[str] = ""
    time_limit_kind: ClassVar[str] = ""

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        """Marks job ``job_id`` failed by ``exc``; each kind says how."""
        raise NotImplementedError(f"{type(self).__name__} does not say how its job fails")

    def _attempt_key(self) -> str | None:
        """The message's key: its task id and retry number, since a retry is a new message
        under the same id (None when the task is called as a function)."""
        task_id = self.request.id
        return None if task_id is None else f"{task_id}:{self.request.retries or 0}"

    def _job_id(self, args, kwargs) -> Any:
        return kwargs.get(self.job_id_arg, args[0] if args else None)

    @property
    def message_attempt(self) -> int:
        """Which delivery of its message this run is: 1, or more when a worker died under
        it before (1 also when the task is called as a function)."""
        return getattr(self.request, "message_attempt", None) or 1

    def __call__(self, *args, **kwargs):
        key = self._attempt_key()
        attempt = 1 if key is None else task_attempt_claim(key=key, task=self.name)
        if attempt:
            # Celery's request Context takes any attribute; its stubs declare none of ours.
            self.request.message_attempt = attempt  # type: ignore[attr-defined]
            return super().__call__(*args, **kwargs)
        attempts = settings.ARBITER_JOB_MAX_ATTEMPTS
        logger.warning("%s: message %s quarantined after %d attempts", self.name, key, attempts)
        job_id = self._job_id(args, kwargs)
        if job_id is not None:
            self.job_fail(job_id, JobStopped(quarantine_reason(attempts)))
        return None

    def after_return(self, status, retval, task_id, args, kwargs, einfo):
        # Also in the worker's main process, after a hard time limit killed the task.
        if task_id is not None:
            record_failure(lambda: task_attempt_forget(task_id=task_id))

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        job_id = self._job_id(args, kwargs)
        if isinstance(exc, TIME_LIMIT_ERRORS) and self.time_limit_kind:
            exc = JobStopped(time_limit_reason(self.time_limit_kind))
        if job_id is not None:
            # on a new database connection when the task failed on a lost one
            record_failure(lambda: self.job_fail(job_id, exc))


def job_failure_text(exc: BaseException, fallback: str) -> str:
    """A failed task's reason on its job: a ``JobStopped``'s own words, else ``fallback``."""
    return str(exc) if isinstance(exc, JobStopped) else fallback


def stalled_before() -> datetime:
    """Jobs with no progress since this moment are stalled (``ARBITER_STALLED_AFTER_S``)."""
    return timezone.now() - timedelta(seconds=settings.ARBITER_STALLED_AFTER_S)


class StalledJobs(Generic[Job]):
    """One kind of job as the stalled-job sweep sees it. ``stalled`` lists the candidates;
    ``claim`` takes one with a conditional UPDATE and returns what it changed (falsy when
    another sweep took it first), so two sweeps never both recover a job; ``recover``
    resumes or fails it; when that raises one of ``refusals`` (the broker is down, say),
    ``unclaim`` puts the claim back for the next sweep."""

    noun: ClassVar[str] = "job"
    refusals: ClassVar[tuple[type[Exception], ...]] = (Unavailable,)

    def stalled(self) -> Iterable[Job]:
        raise NotImplementedError

    def claim(self, job: Job) -> Any:
        return True

    def recover(self, job: Job) -> Any:
        raise NotImplementedError

    def unclaim(self, job: Job, claim: Any) -> None:
        return None

    def key(self, job: Job) -> Any:
        """What the sweep returns for ``job``: its id, that is a model's pk, the first column
        of a row (``values_list("pk", "progress_at")``, the claim's check) or the job itself
        (an id already)."""
        if isinstance(job, tuple):
            return job[0]
        return getattr(job, "pk", job)

    def sweep(self) -> list:
        """Claims and recovers every stalled job; returns the keys of those recovered."""
        recovered = []
        for job in list(self.stalled()):
            claim = self.claim(job)
            if not claim:
                continue
            try:
                outcome = self.recover(job)
            except self.refusals as exc:
                self.unclaim(job, claim)
                logger.warning("stalled %s %s not recovered: %s", self.noun, self.key(job), exc)
                continue
            done = "" if outcome is None else f": {outcome}"
            logger.info("stalled %s %s recovered%s", self.noun, self.key(job), done)
            recovered.append(self.key(job))
        return recovered


# Task name -> the kind its beat task sweeps (every one is in CELERY_BEAT_SCHEDULE).
SWEEPS: dict[str, StalledJobs] = {}


def sweep_task(name: str, kind: StalledJobs, *, doc: str) -> Any:
    """Registers ``kind`` with the sweep as the periodic task ``name`` (Celery beat runs it
    every ARBITER_RESUME_STALLED_EVERY_S) and returns that task."""
    if name in SWEEPS:
        raise ValueError(f"The sweep {name} is registered already.")
    SWEEPS[name] = kind

    def run() -> None:
        kind.sweep()

    run.__name__ = run.__qualname__ = name.rpartition(".")[2]
    run.__doc__ = doc
    return shared_task(name=name, ignore_result=True, **time_limits("sweep"))(run)
