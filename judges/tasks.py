"""Thin Celery tasks for filter runs, judge evaluations and reward-model trainings: take ids,
call a service.
``acks_late`` plus the unique verdict and judgement keys make every task safe to run again
after a crash; a task that raises marks its run or evaluation failed (``on_failure``), so
neither hangs in "running"; Celery beat resumes runs, evaluations and trainings whose queued
work was lost (the ``*_resume_stalled`` tasks)."""

from __future__ import annotations

from celery import Task, shared_task
from celery.signals import worker_process_shutdown

from annotation.core.failures import describe_error, record_failure
from judges.evaluation import services as evaluations
from judges.reward_model import services as training
from judges.runs import services as runs


class _RecordsFailure(Task):
    """Acknowledged after its work; a final failure is recorded on the object whose id is the
    task's first argument (``id_kwarg``), through ``record_failure(id, error)``."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    id_kwarg = ""

    def record_failure(self, pk: int, error: str) -> None:
        raise NotImplementedError

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        pk = kwargs.get(self.id_kwarg, args[0] if args else None)
        if pk is not None:
            # on a new database connection when the task failed on a lost one
            record_failure(lambda: self.record_failure(pk, describe_error(exc)))


class FilterRunTask(_RecordsFailure):
    abstract = True
    id_kwarg = "run_id"

    def record_failure(self, pk: int, error: str) -> None:
        runs.filter_run_fail(run_id=pk, error=error)


class JudgeEvaluationTask(_RecordsFailure):
    abstract = True
    id_kwarg = "evaluation_id"

    def record_failure(self, pk: int, error: str) -> None:
        evaluations.judge_evaluation_fail(evaluation_id=pk, error=error)


class TrainingRunTask(_RecordsFailure):
    """As a filter run's: a pool process lost mid-training gives the job back, and the claim
    takes the run over when the process that held it has ended, or once the run has gone
    ARBITER_STALLED_AFTER_S without progress; it resumes after the last saved epoch."""

    abstract = True
    id_kwarg = "run_id"

    def record_failure(self, pk: int, error: str) -> None:
        training.training_run_fail(run_id=pk, error=error)


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


@shared_task(base=JudgeEvaluationTask, name="judges.judge_evaluation_batch")
def judge_evaluation_batch(evaluation_id: int, items: list, attempt: int = 1) -> None:
    evaluations.judge_evaluation_judge_batch(
        evaluation_id=evaluation_id, items=items, attempt=attempt
    )


@shared_task(name="judges.judge_evaluations_resume_stalled", ignore_result=True)
def judge_evaluations_resume_stalled() -> None:
    """Celery beat's sweep (``CELERY_BEAT_SCHEDULE``): resumes evaluations with no progress."""
    evaluations.judge_evaluations_resume_stalled()


@shared_task(base=TrainingRunTask, name="judges.training_run_execute")
def training_run_execute(run_id: int) -> None:
    training.training_run_execute(run_id=run_id)


@shared_task(name="judges.training_runs_resume_stalled", ignore_result=True)
def training_runs_resume_stalled() -> None:
    """Celery beat's sweep (``CELERY_BEAT_SCHEDULE``): sends stalled trainings again."""
    training.training_runs_resume_stalled()
