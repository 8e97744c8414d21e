"""Thin Celery tasks for filter runs, judge evaluations and reward-model trainings: take ids,
call a service. A service sends its task by the name given here, so none imports this module.
``acks_late`` plus the unique verdict and judgement keys make every task safe to run again
after a crash; a task that raises marks its run, evaluation or training failed (the kernel's
``JobTask``), so none hangs in "running"; Celery beat resumes those whose queued work was
lost (the ``*_resume_stalled`` sweeps, registered with the kernel's ``sweep_task``). Each task
has the soft and hard time limits of its kind (``time_limits``: a filter run's and an
evaluation's per batch), and one stopped by its limit fails its job saying so."""

from __future__ import annotations

from celery import shared_task
from celery.signals import worker_process_shutdown

from annotation.core.failures import describe_error
from annotation.core.jobs import JobStopped, JobTask, sweep_task, time_limits
from judges.backends.event_loop import event_loop_stop
from judges.evaluation import services as evaluations
from judges.reward_model import services as training
from judges.runs import services as runs
from judges.runs.calls import judge_backends_close


def _reason(exc: BaseException) -> str:
    """A ``JobStopped``'s own words (a time limit), else the error named."""
    return str(exc) if isinstance(exc, JobStopped) else describe_error(exc)


class FilterRunTask(JobTask):
    abstract = True
    job_id_arg = "run_id"
    time_limit_kind = "filter run"

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        runs.filter_run_fail(run_id=job_id, error=_reason(exc))


class JudgeEvaluationTask(JobTask):
    abstract = True
    job_id_arg = "evaluation_id"
    time_limit_kind = "evaluation"

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        evaluations.judge_evaluation_fail(evaluation_id=job_id, error=_reason(exc))


class TrainingRunTask(JobTask):
    """As a filter run's: a pool process lost mid-training gives the job back, and the claim
    takes the run over when the process that held it has ended, or once the run has gone
    ARBITER_STALLED_AFTER_S without progress; it resumes after the last saved epoch."""

    abstract = True
    job_id_arg = "run_id"
    time_limit_kind = "training"

    def job_fail(self, job_id: int, exc: BaseException) -> None:
        training.training_run_fail(run_id=job_id, error=_reason(exc))


@shared_task(base=FilterRunTask, name="judges.filter_run_start", **time_limits("filter run"))
def filter_run_start(run_id: int) -> None:
    runs.filter_run_start(run_id=run_id)


@shared_task(
    base=FilterRunTask, bind=True, name="judges.filter_run_batch", **time_limits("filter run")
)
def filter_run_batch(
    self,
    run_id: int,
    work: list | None = None,
    attempt: int = 1,
    batch_id: int | None = None,
    judge_id: int | None = None,
    items: list | None = None,
) -> None:
    # ``judge_id`` and ``items``: one judge's batch, as queued before batches held several.
    work = work if work is not None else [[judge_id, items or []]]
    # The task's id claims its batch: a delivery again, after its process died, takes back
    # what the first one claimed.
    runs.filter_run_judge_batch(
        run_id=run_id, work=work, attempt=attempt, batch_id=batch_id, owner=self.request.id
    )


@shared_task(base=FilterRunTask, name="judges.filter_run_finish", **time_limits("filter run"))
def filter_run_finish(run_id: int) -> None:
    runs.filter_run_finish_if_complete(run_id=run_id)


filter_runs_resume_stalled = sweep_task(
    "judges.filter_runs_resume_stalled",
    runs.STALLED_RUNS,
    doc="Celery beat's sweep (``CELERY_BEAT_SCHEDULE``): resumes runs with no recent progress.",
)


@worker_process_shutdown.connect
def _close_judge_backends(**kwargs) -> None:
    judge_backends_close()
    event_loop_stop()


@shared_task(
    base=JudgeEvaluationTask, name="judges.judge_evaluation_batch", **time_limits("evaluation")
)
def judge_evaluation_batch(evaluation_id: int, items: list, attempt: int = 1) -> None:
    evaluations.judge_evaluation_judge_batch(
        evaluation_id=evaluation_id, items=items, attempt=attempt
    )


judge_evaluations_resume_stalled = sweep_task(
    "judges.judge_evaluations_resume_stalled",
    evaluations.STALLED_EVALUATIONS,
    doc="Celery beat's sweep (``CELERY_BEAT_SCHEDULE``): resumes evaluations with no progress.",
)


@shared_task(base=TrainingRunTask, name="judges.training_run_execute", **time_limits("training"))
def training_run_execute(run_id: int) -> None:
    training.training_run_execute(run_id=run_id)


training_runs_resume_stalled = sweep_task(
    "judges.training_runs_resume_stalled",
    training.STALLED_TRAININGS,
    doc="Celery beat's sweep (``CELERY_BEAT_SCHEDULE``): sends stalled trainings again.",
)
