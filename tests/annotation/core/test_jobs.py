"""The job lifecycle every job kind shares (annotation/core/jobs.py): a task published after
the commit, the broker's refusal turned into ``BrokerUnavailable`` after the kind recorded it,
a task's final failure recorded on its job, and the stalled-job sweep each kind registers."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from celery import shared_task
from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError

from annotation.agreement.services import REFRESH_TASK
from annotation.core import jobs
from annotation.core.broker import registered_task
from annotation.core.errors import Unavailable
from annotation.core.jobs import BrokerUnavailable, JobTask, StalledJobs, job_publish
from annotation.imports.services import IMPORT_RUN_TASK
from annotation.models import TaskAttempt
from annotation.releases.services import RELEASE_BUILD_TASK
from judges.evaluation.services import EVALUATION_BATCH_TASK
from judges.reward_model.services import TRAINING_TASK
from judges.runs.services import BATCH_TASK, FINISH_TASK, START_TASK
from tests.celery_worker import time_limits_env

ROOT = Path(__file__).resolve().parents[3]


class RecordingTask:
    """A task as ``job_publish`` sees it: what it was sent with, or the broker's refusal."""

    name = "tests.recording"

    def __init__(self, *, refuse: bool = False) -> None:
        self.sent: list[dict] = []
        self.refuse = refuse

    def apply_async(self, **options) -> None:
        if self.refuse:
            raise OperationalError("Error 111 connecting to broker.internal:6379.")
        self.sent.append(options)


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_task_is_sent_at_once_with_a_bounded_retry():
    task = RecordingTask()
    job_publish(task, args=(7,), queue="default")
    assert len(task.sent) == 1
    assert task.sent[0]["args"] == (7,)
    assert task.sent[0]["queue"] == "default"
    assert task.sent[0]["retry_policy"] == {
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0.5,
    }


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_task_waits_for_the_commit_and_a_rollback_drops_it():
    task = RecordingTask()
    with transaction.atomic():
        job_publish(task, args=(1,))
        assert task.sent == []  # a worker must not see a job that is not committed yet
    assert [options["args"] for options in task.sent] == [(1,)]

    class RolledBack(Exception):
        pass

    def publish_then_fail() -> None:
        with transaction.atomic():
            job_publish(task, args=(2,))
            raise RolledBack

    with pytest.raises(RolledBack):
        publish_then_fail()
    assert [options["args"] for options in task.sent] == [(1,)]


@pytest.mark.django_db(transaction=True)
def test_after_commit_false_sends_at_once_even_inside_a_transaction():
    task = RecordingTask()
    with transaction.atomic():
        job_publish(task, args=(3,), after_commit=False)
        assert [options["args"] for options in task.sent] == [(3,)]


@pytest.mark.django_db(transaction=True)
def test_a_refusal_is_recorded_by_the_kind_then_raised_without_the_brokers_address():
    recorded: list[BrokerUnavailable] = []
    with pytest.raises(BrokerUnavailable) as raised:
        job_publish(RecordingTask(refuse=True), args=(1,), on_refused=recorded.append)
    assert recorded == [raised.value]
    assert isinstance(raised.value, Unavailable)  # answered 503 like every Unavailable
    assert str(raised.value) == "The task queue is unreachable."
    assert "broker.internal" not in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_the_kind_may_say_more_about_a_refusal():
    def refused(exc: BrokerUnavailable) -> None:
        raise BrokerUnavailable(f"{exc} Job 4 failed.") from exc

    with pytest.raises(
        BrokerUnavailable, match=r"^The task queue is unreachable\. Job 4 failed\.$"
    ):
        job_publish(RecordingTask(refuse=True), on_refused=refused)


@pytest.mark.django_db(transaction=True)
def test_a_refusal_at_the_commit_raises_from_the_commit():
    recorded: list[BrokerUnavailable] = []
    with pytest.raises(BrokerUnavailable), transaction.atomic():
        job_publish(RecordingTask(refuse=True), on_refused=recorded.append)
    assert len(recorded) == 1


@pytest.mark.django_db(transaction=True)
def test_log_at_commit_raises_to_a_caller_but_logs_a_refusal_met_at_the_commit(caplog):
    recorded: list[BrokerUnavailable] = []
    with pytest.raises(BrokerUnavailable):
        job_publish(RecordingTask(refuse=True), on_refused=recorded.append, refusal="log_at_commit")
    assert len(recorded) == 1
    with caplog.at_level(logging.WARNING, logger="annotation.core.jobs"), transaction.atomic():
        job_publish(RecordingTask(refuse=True), on_refused=recorded.append, refusal="log_at_commit")
    assert len(recorded) == 2  # recorded on the job all the same
    assert [r.getMessage() for r in caplog.records if r.name == "annotation.core.jobs"] == [
        "tests.recording not queued: The task queue is unreachable."
    ]


@pytest.mark.django_db(transaction=True)
def test_log_records_the_refusal_on_the_job_and_raises_nothing(caplog):
    recorded: list[BrokerUnavailable] = []
    with caplog.at_level(logging.WARNING, logger="annotation.core.jobs"):
        job_publish(RecordingTask(refuse=True), on_refused=recorded.append, refusal="log")
    assert [str(exc) for exc in recorded] == ["The task queue is unreachable."]
    assert "tests.recording not queued" in caplog.text


PUBLISHED: list[int] = []


@shared_task(name="tests.jobs.published_by_name")
def published_by_name(job_id: int) -> None:
    PUBLISHED.append(job_id)


@pytest.mark.django_db(transaction=True)
def test_a_task_named_as_registered_is_sent_through_the_task_and_runs_eagerly_in_tests():
    PUBLISHED.clear()
    with transaction.atomic():
        job_publish("tests.jobs.published_by_name", args=(8,))
        assert PUBLISHED == []  # after the commit, as a task passed itself
    assert PUBLISHED == [8]  # CELERY_TASK_ALWAYS_EAGER: send_task would have queued it


# Every task a service sends by name (the services import no task module).
SENT_BY_NAME = [
    IMPORT_RUN_TASK,
    REFRESH_TASK,
    RELEASE_BUILD_TASK,
    START_TASK,
    BATCH_TASK,
    FINISH_TASK,
    EVALUATION_BATCH_TASK,
    TRAINING_TASK,
]


def test_the_names_the_services_send_are_the_tasks_registered_names():
    import annotation.tasks
    import judges.tasks

    tasks = [
        annotation.tasks.import_run,
        annotation.tasks.agreement_report_refresh,
        annotation.tasks.release_build_run,
        judges.tasks.filter_run_start,
        judges.tasks.filter_run_batch,
        judges.tasks.filter_run_finish,
        judges.tasks.judge_evaluation_batch,
        judges.tasks.training_run_execute,
    ]
    assert [task.name for task in tasks] == SENT_BY_NAME
    assert [registered_task(name) for name in SENT_BY_NAME] == tasks


_FRESH_PROCESS = f"""
import django
django.setup()
from celery import current_app
from annotation.core.broker import registered_task
names = {SENT_BY_NAME!r}
print(sum(name in current_app.tasks for name in names))
print(sum(registered_task(name).name == name for name in names))
"""


def test_a_process_that_has_not_loaded_the_task_modules_finds_the_tasks_by_name():
    """A web process imports no task module of its own: the first send loads them, as a
    worker does when it starts."""
    result = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["0", str(len(SENT_BY_NAME))]


FAILED: list[tuple[int, str]] = []  # what the failing task's kind recorded: (job id, error)


class _FailingJobTask(JobTask):
    abstract = True
    job_id_arg = "job_id"

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        FAILED.append((job_id, f"{type(exc).__name__}: {exc}"))


@shared_task(base=_FailingJobTask, name="tests.jobs.always_fails")
def always_fails(job_id: int) -> None:
    raise ValueError(f"job {job_id} cannot be done")


def test_a_job_task_is_acknowledged_late_and_given_back_when_its_worker_is_lost():
    assert always_fails.acks_late is True
    assert always_fails.reject_on_worker_lost is True


@pytest.mark.django_db
@pytest.mark.parametrize(
    "call",
    [
        lambda: always_fails.apply(args=(5,), throw=False),
        lambda: always_fails.apply(kwargs={"job_id": 5}, throw=False),
    ],
)
def test_a_job_tasks_final_failure_is_recorded_on_its_job(call):
    FAILED.clear()
    assert call().failed()
    assert FAILED == [(5, "ValueError: job 5 cannot be done")]
    assert not TaskAttempt.objects.exists()  # it returned: no death to count


RAN: list[int] = []  # the attempt each run of the work saw counted


class WorkerDied(BaseException):
    """Stands for the worker's death: an error that is no ``Exception`` goes through
    Celery's tracer, which then runs none of the task's hooks, as a SIGKILL would not."""


@shared_task(base=_FailingJobTask, name="tests.jobs.counts_its_deliveries")
def counts_its_deliveries(job_id: int, die: bool = False) -> None:
    request = counts_its_deliveries.request
    # what the work sees: its delivery counted, committed before it
    RAN.append(TaskAttempt.objects.get(key=f"{request.id}:0").attempts)
    if die:
        raise WorkerDied


def _deliver(job_id: int, *, die: bool = False) -> None:
    """A delivery of the message m1; with ``die`` its worker dies mid-work."""
    if die:
        with pytest.raises(WorkerDied):
            counts_its_deliveries.apply(args=(job_id, True), task_id="m1")
    else:
        counts_its_deliveries.apply(args=(job_id,), task_id="m1")


@pytest.mark.django_db
def test_a_message_killed_once_runs_again_and_forgets_its_count_when_it_returns():
    RAN.clear()
    FAILED.clear()
    _deliver(7, die=True)
    assert TaskAttempt.objects.get(key="m1:0").attempts == 1
    _deliver(7)  # the broker's redelivery
    assert (RAN, FAILED) == ([1, 2], [])
    assert not TaskAttempt.objects.exists()


@pytest.mark.django_db
def test_a_message_killed_twice_is_quarantined_on_its_next_delivery_and_does_no_work():
    RAN.clear()
    FAILED.clear()
    _deliver(8, die=True)
    _deliver(8, die=True)
    _deliver(8)  # the third delivery
    assert RAN == [1, 2]  # no work the third time
    assert [(8, "JobStopped: " + jobs.quarantine_reason(2))] == FAILED
    assert not TaskAttempt.objects.exists()  # acknowledged: nothing delivers it again


@pytest.mark.django_db
def test_a_retry_is_a_new_message_with_attempts_of_its_own(settings):
    """A task that goes back to the queue (a busy project's import) spends no attempt of the
    next message, which Celery sends under the same task id."""
    assert jobs.task_attempt_claim(key="same-id:0", task="t") == 1
    assert jobs.task_attempt_claim(key="same-id:0", task="t") == 2
    assert jobs.task_attempt_claim(key="same-id:0", task="t") == 0  # spent
    assert jobs.task_attempt_claim(key="same-id:1", task="t") == 1  # the retry
    jobs.task_attempt_forget(task_id="same-id")
    assert not TaskAttempt.objects.exists()


def test_a_kind_that_does_not_say_how_its_job_fails_is_told_so():
    class Silent(JobTask):
        abstract = True

    with pytest.raises(NotImplementedError, match="Silent does not say how its job fails"):
        Silent().job_fail(1, ValueError("x"))


class Kind(StalledJobs[int]):
    """Jobs 1..4 are stalled; another sweep holds 2; the broker refuses 3."""

    noun = "test job"

    def __init__(self) -> None:
        self.claimed: set[int] = set()
        self.unclaimed: list[tuple[int, object]] = []

    def stalled(self):
        return [1, 2, 3, 4]

    def claim(self, job):
        if job == 2:
            return 0
        self.claimed.add(job)
        return f"claim-{job}"

    def recover(self, job):
        if job == 3:
            raise BrokerUnavailable("The task queue is unreachable.")
        return f"sent {job}"

    def unclaim(self, job, claim):
        self.claimed.discard(job)
        self.unclaimed.append((job, claim))


def test_the_sweep_recovers_what_it_claimed_and_gives_back_what_the_broker_refused(caplog):
    kind = Kind()
    with caplog.at_level(logging.INFO, logger="annotation.core.jobs"):
        assert kind.sweep() == [1, 4]
    assert kind.claimed == {1, 4}
    assert kind.unclaimed == [(3, "claim-3")]  # the next sweep tries it again
    messages = [record.getMessage() for record in caplog.records]
    assert "stalled test job 3 not recovered: The task queue is unreachable." in messages
    assert "stalled test job 1 recovered: sent 1" in messages
    assert "stalled test job 2 recovered" not in " ".join(messages)  # another sweep has it


def test_an_error_the_kind_does_not_expect_stops_the_sweep():
    class Broken(Kind):
        def recover(self, job):
            raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        Broken().sweep()


def test_every_sweep_is_registered_once_and_scheduled_by_celery_beat():
    import annotation.tasks
    import judges.tasks  # noqa: F401 - judges registers its kinds with the kernel

    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    # Every sweep, and one periodic task that is no job's sweep: due webhook deliveries,
    # claimed from the database (docs/webhooks.md).
    assert scheduled - set(jobs.SWEEPS) == {"annotation.webhooks_deliver_due"}
    assert set(jobs.SWEEPS) <= scheduled
    # imports, agreement refreshes, release builds; filter runs, evaluations, trainings
    assert len(jobs.SWEEPS) == 6
    with pytest.raises(ValueError, match=r"annotation\.imports_resume_stalled is registered"):
        jobs.sweep_task(
            "annotation.imports_resume_stalled",
            jobs.SWEEPS["annotation.imports_resume_stalled"],
            doc="",
        )
    assert annotation.tasks.imports_resume_stalled.name == "annotation.imports_resume_stalled"


def test_the_sweep_task_runs_its_kinds_sweep(monkeypatch):
    import annotation.tasks

    swept = []
    kind = jobs.SWEEPS["annotation.imports_resume_stalled"]
    monkeypatch.setattr(kind, "sweep", lambda: swept.append(kind) or [])
    annotation.tasks.imports_resume_stalled.apply()
    assert swept == [kind]


APP_CODE = ("annotation", "judges")
# The kernel and the broker module it sends through are the only places that talk to Celery.
SENDS = re.compile(r"\.(delay|apply_async|send_task)\(|\btask_publish\(")


def test_tasks_are_published_only_through_the_kernel():
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in APP_CODE
        for path in (ROOT / package).rglob("*.py")
        if path.relative_to(ROOT).as_posix()
        not in ("annotation/core/jobs.py", "annotation/core/broker.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SENDS.search(line)
    ]
    assert offenders == []


# Time limits, attempts and quarantine (docs/operations.md) ----------------------------------


def _arbiter_tasks():
    from config.celery import app

    registered_task(IMPORT_RUN_TASK)  # loads the installed apps' task modules
    return {
        name: task
        for name, task in app.tasks.items()
        if name.startswith(("annotation.", "judges."))
    }


def test_every_task_has_soft_and_hard_time_limits_below_the_visibility_timeout():
    tasks = _arbiter_tasks()
    assert len(tasks) >= 14  # every task of both apps, the sweeps included
    visibility = 3600  # CELERY_VISIBILITY_S's default, where the broker is Redis
    for name, task in tasks.items():
        assert task.soft_time_limit, f"{name} has no soft time limit"
        assert task.time_limit, f"{name} has no hard time limit"
        assert task.soft_time_limit < task.time_limit < visibility, name


def test_the_limits_are_those_of_the_tasks_kind(settings):
    tasks = _arbiter_tasks()
    grace = settings.ARBITER_TASK_KILL_AFTER_S
    for name, kind in (
        ("annotation.tasks.import_run", "import"),
        ("annotation.tasks.release_build_run", "release build"),
        ("annotation.agreement_report_refresh", "agreement refresh"),
        ("judges.filter_run_batch", "filter run"),
        ("judges.judge_evaluation_batch", "evaluation"),
        ("judges.training_run_execute", "training"),
        ("annotation.imports_resume_stalled", "sweep"),
    ):
        soft, _ = settings.ARBITER_TASK_TIME_LIMITS[kind]
        assert (tasks[name].soft_time_limit, tasks[name].time_limit) == (soft, soft + grace)


def _start_django(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "CELERY_BROKER_URL": "redis://127.0.0.1:1/0", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_limit_that_reaches_the_visibility_timeout_stops_the_start():
    refused = _start_django(CELERY_VISIBILITY_S="900", ARBITER_IMPORT_TIME_LIMIT_S="850")
    assert refused.returncode != 0
    assert (
        "ARBITER_IMPORT_TIME_LIMIT_S=850 plus ARBITER_TASK_KILL_AFTER_S=60 reaches the broker's "
        "visibility timeout (CELERY_VISIBILITY_S=900)"
    ) in refused.stderr
    short = time_limits_env(100)
    assert _start_django(CELERY_VISIBILITY_S="900", **short).returncode == 0


def test_a_time_limit_is_told_in_words_naming_its_setting(settings):
    settings.ARBITER_TASK_TIME_LIMITS = {
        **settings.ARBITER_TASK_TIME_LIMITS,
        "import": (1800, "ARBITER_IMPORT_TIME_LIMIT_S"),
        "sweep": (45, "ARBITER_SWEEP_TIME_LIMIT_S"),
    }
    assert jobs.time_limit_reason("import") == (
        "Took longer than 30 minutes, the import limit (ARBITER_IMPORT_TIME_LIMIT_S)."
    )
    assert jobs.time_limit_reason("sweep") == (
        "Took longer than 45 seconds, the sweep limit (ARBITER_SWEEP_TIME_LIMIT_S)."
    )
    assert jobs.quarantine_reason(2) == (
        "Stopped after 2 attempts: the worker was killed while running it (out of memory or "
        "killed)."
    )


class _TimedJobTask(_FailingJobTask):
    abstract = True
    time_limit_kind = "import"


@shared_task(base=_TimedJobTask, name="tests.jobs.runs_out_of_time")
def runs_out_of_time(job_id: int) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    raise SoftTimeLimitExceeded()


@pytest.mark.django_db
def test_a_task_stopped_by_its_soft_limit_records_the_limit_on_its_job():
    FAILED.clear()
    assert runs_out_of_time.apply(args=(8,), throw=False).failed()
    assert FAILED == [
        (
            8,
            "JobStopped: Took longer than 30 minutes, the import limit "
            "(ARBITER_IMPORT_TIME_LIMIT_S).",
        )
    ]
