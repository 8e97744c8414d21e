"""A judges job whose worker is killed twice is quarantined (docs/operations.md, "Time
limits, attempts and quarantine"): filter-run and evaluation batches count the deliveries of
their message, a training its runs on its row; the third delivery fails the job with the
reason, shown on its page, does no work, and neither the broker nor the sweep sends it again.
A real worker SIGKILLed under a filter-run batch is in test_run_worker.py."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.core.jobs import quarantine_reason
from annotation.models import TaskAttempt
from judges.backends.base import JudgeResult
from judges.evaluation import services as evaluations
from judges.evaluation.services import EVALUATION_BATCH_TASK, judge_evaluation_create
from judges.models import FilterRun, JudgeEvaluation, TrainingRun, Verdict
from judges.reward_model import services as training
from judges.reward_model import trainer
from judges.reward_model.trainer import TrainingOptions
from judges.runs import services as runs
from judges.runs.services import BATCH_TASK
from tests.factories import PairFactory
from tests.job_deaths import deliver, die
from tests.judges.evaluation_support import labelled_pairs
from tests.judges.scripted import make_judges, use_scripted_judges
from tests.judges.training_support import consensus_pairs_in, preference_pairs

pytestmark = pytest.mark.django_db

QUARANTINED = quarantine_reason(2)


def _long_ago(settings):
    return timezone.now() - timedelta(seconds=settings.ARBITER_STALLED_AFTER_S + 1)


def _answer(item):
    return JudgeResult(outcome="ok", preferred="first")


def test_a_filter_run_batch_killed_twice_fails_its_run_and_is_not_resumed(
    project, monkeypatch, settings, client_for, carol
):
    pairs = PairFactory.create_batch(2, project=project)
    judge = make_judges("slow")[0]
    run = runs.filter_run_create(project=project, judges=[judge])  # its start never commits
    FilterRun.objects.filter(pk=run.pk).update(status="running")
    batch = {"run_id": run.pk, "judge_id": judge.pk, "items": [[pairs[0].pk, "AB"]]}
    calls = use_scripted_judges(monkeypatch, {"slow": die})
    deliver(BATCH_TASK, kwargs=batch, dies=True)
    deliver(BATCH_TASK, kwargs=batch, dies=True)
    assert TaskAttempt.objects.get().attempts == 2
    calls = use_scripted_judges(monkeypatch, {"slow": _answer})

    deliver(BATCH_TASK, kwargs=batch)

    assert calls == []  # the third delivery did no work
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", QUARANTINED)
    assert not Verdict.objects.exists()
    assert not TaskAttempt.objects.exists()  # acknowledged
    page = client_for(carol).get(reverse("judges:run", args=[project.slug, run.number]))
    assert QUARANTINED in page.content.decode()
    FilterRun.objects.filter(pk=run.pk).update(created_at=_long_ago(settings))
    assert runs.filter_runs_resume_stalled() == []  # a failed run waits for a curator


def test_an_evaluation_batch_killed_twice_fails_the_evaluation_and_is_not_resumed(
    project, monkeypatch, settings
):
    pairs = labelled_pairs(project, "AB")
    judge = make_judges("slow")[0]
    judge.projects.add(project)
    evaluation = judge_evaluation_create(judge=judge, project=project)
    JudgeEvaluation.objects.filter(pk=evaluation.pk).update(status="running")
    batch = {"evaluation_id": evaluation.pk, "items": [[pairs[0].pk, "AB"]]}
    use_scripted_judges(monkeypatch, {"slow": die})
    deliver(EVALUATION_BATCH_TASK, kwargs=batch, dies=True)
    deliver(EVALUATION_BATCH_TASK, kwargs=batch, dies=True)
    calls = use_scripted_judges(monkeypatch, {"slow": _answer})

    deliver(EVALUATION_BATCH_TASK, kwargs=batch)

    assert calls == []
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.error) == ("failed", QUARANTINED)
    JudgeEvaluation.objects.filter(pk=evaluation.pk).update(progress_at=_long_ago(settings))
    assert evaluations.judge_evaluations_resume_stalled() == []


def _gone_holder() -> str:
    """The holder a killed pool process leaves on its run: a process that no longer exists."""
    return f"{socket.gethostname()}:{2**22 + 17}:12345"


def test_a_training_killed_twice_is_quarantined_and_not_sent_again(
    project, tmp_path, monkeypatch, settings
):
    consensus_pairs_in(project, preference_pairs(40))
    run = training.training_run_create(
        project=project,
        options=TrainingOptions(epochs=1, batch_size=32),
        out_dir=str(tmp_path / "out"),
        enqueue=False,
    )
    job = {"run_id": run.pk}
    monkeypatch.setattr(trainer, "train", die)
    for attempt in (1, 2):
        deliver(training.TRAINING_TASK, kwargs=job, dies=True)
        run.refresh_from_db()
        assert (run.status, run.attempts) == ("running", attempt)  # counted before the work
        TrainingRun.objects.filter(pk=run.pk).update(worker=_gone_holder())
    monkeypatch.setattr(trainer, "train", lambda *a, **k: pytest.fail("a quarantined run trained"))

    deliver(training.TRAINING_TASK, kwargs=job)

    run.refresh_from_db()
    assert (run.status, run.error, run.attempts) == ("failed", QUARANTINED, 2)
    TrainingRun.objects.filter(pk=run.pk).update(heartbeat_at=_long_ago(settings))
    assert training.training_runs_resume_stalled() == []


def test_the_sweep_quarantines_a_stalled_training_out_of_attempts_instead_of_sending_it(
    project, tmp_path, monkeypatch, settings
):
    from judges import tasks

    sent: list[dict] = []
    monkeypatch.setattr(tasks.training_run_execute, "apply_async", lambda **o: sent.append(o))
    consensus_pairs_in(project, preference_pairs(40))
    spent, once = (
        training.training_run_create(
            project=project,
            options=TrainingOptions(epochs=1, batch_size=32),
            out_dir=str(tmp_path / f"out-{i}"),
            enqueue=False,
        )
        for i in range(2)
    )
    quiet = _long_ago(settings)
    TrainingRun.objects.filter(pk=spent.pk).update(status="running", heartbeat_at=quiet, attempts=2)
    TrainingRun.objects.filter(pk=once.pk).update(status="running", heartbeat_at=quiet, attempts=1)

    assert sorted(training.training_runs_resume_stalled()) == sorted([spent.pk, once.pk])

    assert [options["kwargs"] for options in sent] == [{"run_id": once.pk}]  # killed once
    spent.refresh_from_db()
    assert (spent.status, spent.error) == ("failed", QUARANTINED)
