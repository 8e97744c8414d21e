"""Thin Celery tasks for filter runs: take ids, call a service. ``acks_late`` plus the unique
verdict key make every task safe to run again after a crash; a task that raises marks its run
failed (``on_failure``), so a run never hangs in "running"; Celery beat resumes runs whose
queued work was lost (``filter_runs_resume_stalled``)."""

from __future__ import annotations

from celery import Task, shared_task
from celery.signals import worker_process_shutdown

from judges.services import runs, training


class FilterRunTask(Task):
    acks_late = True
    reject_on_worker_lost = True

    @staticmethod
    def fail(*, run_id: int, error: str) -> None:
        runs.filter_run_fail(run_id=run_id, error=error)

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        run_id = kwargs.get("run_id", args[0] if args else None)
        if run_id is not None:
            self.fail(run_id=run_id, error=f"{type(exc).__name__}: {exc}")


@shared_task(base=FilterRunTask, name="judges.filter_run_start")
def filter_run_start(run_id: int) -> None:
    runs.filter_run_start(run_id=run_id)


@shared_task(base=FilterRunTask, name="judges.filter_run_batch")
def filter_run_batch(run_id: int, judge_id: int, items: list, attempt: int = 1) -> None:
    runs.filter_run_judge_batch(run_id=run_id, judge_id=judge_id, items=items, attempt=attempt)


@shared_task(base=FilterRunTask, name="judges.filter_run_finish")
def filter_run_finish(run_id: int) -> None:
    runs.filter_run_finish_if_complete(run_id=run_id)


@shared_task(name="judges.filter_runs_resume_stalled", ignore_result=True)
def filter_runs_resume_stalled() -> None:
    """Celery beat's sweep (``CELERY_BEAT_SCHEDULE``): resumes runs with no recent progress."""
    runs.filter_runs_resume_stalled()


@worker_process_shutdown.connect
def _close_judge_backends(**kwargs) -> None:
    runs.judge_backends_close()


class TrainingRunTask(FilterRunTask):
    """As a filter run's: a worker lost mid-training gives the job back, and the claim lets it
    start again only once the run has gone ARBITER_STALLED_AFTER_S without progress."""

    @staticmethod
    def fail(*, run_id: int, error: str) -> None:
        training.training_run_fail(run_id=run_id, error=error)


@shared_task(base=TrainingRunTask, name="judges.training_run_execute")
def training_run_execute(run_id: int) -> None:
    training.training_run_execute(run_id=run_id)
