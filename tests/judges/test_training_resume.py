"""A reward-model training that is killed resumes after its last completed epoch and ends
with the weights an uninterrupted training gives: the trainer's saved state; a claim that
takes over from a pool process that is gone; and, on a real Celery worker (Redis), a pool
process SIGKILLed mid-training (what the out-of-memory killer does) and a whole worker killed,
recovered by Celery beat's sweep."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis
import torch
from django.utils import timezone

from judges.models import TrainingRun
from judges.reward_model import services as training
from judges.reward_model.model import load_checkpoint
from judges.reward_model.trainer import TrainingOptions, train
from tests.judges.training_support import consensus_pairs_in, preference_pairs

SMALL = {"n_buckets": 4096, "embed_dim": 16, "hidden_dim": 32}


class Killed(Exception):
    pass


def assert_same_weights(one: dict, other: dict) -> None:
    assert one.keys() == other.keys()
    for name in one:
        assert torch.equal(one[name].cpu(), other[name].cpu()), name


def test_a_training_stopped_mid_way_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    pairs = preference_pairs(120, seed=2)
    options = TrainingOptions(seed=5, epochs=5, batch_size=16, patience=5, lr=0.01)
    whole = train(pairs, options, model_config=SMALL)
    state = tmp_path / "state.pt"

    def die_in_epoch_3(metrics) -> None:
        if metrics.epoch == 3:
            raise Killed  # before epoch 3's state is written: epochs 1-2 are saved

    with pytest.raises(Killed):
        train(pairs, options, model_config=SMALL, state_path=state, on_epoch=die_in_epoch_3)
    restored: list = []
    resumed = train(pairs, options, model_config=SMALL, state_path=state, on_start=restored.append)
    assert resumed.resumed_from_epoch == 2
    assert [m.epoch for m in restored[0]] == [1, 2]
    assert resumed.history == whole.history
    assert resumed.best_epoch == whole.best_epoch
    assert_same_weights(resumed.model.state_dict(), whole.model.state_dict())

    # A finished training's state has no epoch left: read back, nothing trained again.
    again = train(pairs, options, model_config=SMALL, state_path=state)
    assert again.resumed_from_epoch == len(whole.history)
    assert_same_weights(again.model.state_dict(), whole.model.state_dict())
    # Another training's state (other pairs, other options) is not taken for its own.
    assert train(pairs[:-2], options, model_config=SMALL, state_path=state).resumed_from_epoch == 0
    other = TrainingOptions(seed=6, epochs=1, batch_size=16)
    assert train(pairs, other, model_config=SMALL, state_path=state).resumed_from_epoch == 0


@pytest.mark.django_db
def test_a_claim_takes_over_only_from_a_holder_that_is_gone(project, tmp_path):
    consensus_pairs_in(project, preference_pairs(40))
    run = training.training_run_create(
        project=project,
        options=TrainingOptions(epochs=1, batch_size=32),
        out_dir=str(tmp_path / "out"),
        enqueue=False,
    )
    me = training.worker_token()
    host, pid, start = me.split(":")
    alive = f"{host}:{os.getppid()}:{training._process_start(os.getppid())}"
    elsewhere = f"another-host:{pid}:{start}"
    reused_pid = f"{host}:{pid}:{int(start) - 1}"  # a pid given again after a restart
    fresh = timezone.now()
    for holder in (alive, elsewhere, f"{host}:{pid}:"):
        TrainingRun.objects.filter(pk=run.pk).update(
            status="running", heartbeat_at=fresh, worker=holder
        )
        assert training.training_run_execute(run_id=run.pk) is None, holder
    gone = f"{host}:{2**22 + 17}:12345"  # above any pid this machine hands out
    for holder in (gone, reused_pid):
        TrainingRun.objects.filter(pk=run.pk).update(
            status="running", heartbeat_at=fresh, worker=holder
        )
        done = training.training_run_execute(run_id=run.pk)
        assert done is not None, holder
        assert done.status == "succeeded", holder
        assert done.worker == me


@pytest.mark.django_db
def test_the_sweep_sends_stalled_trainings_again_once(project, tmp_path, settings, monkeypatch):
    from judges import tasks

    sent: list[dict] = []
    monkeypatch.setattr(
        tasks.training_run_execute, "apply_async", lambda **options: sent.append(options)
    )
    consensus_pairs_in(project, preference_pairs(40))
    runs = [
        training.training_run_create(
            project=project,
            options=TrainingOptions(epochs=2, batch_size=16),
            out_dir=str(tmp_path / f"out-{i}"),
            enqueue=False,
        )
        for i in range(4)
    ]
    quiet = timezone.now() - timedelta(seconds=settings.ARBITER_STALLED_AFTER_S + 1)
    stalled, busy, pending, done = runs
    TrainingRun.objects.filter(pk=stalled.pk).update(status="running", heartbeat_at=quiet)
    TrainingRun.objects.filter(pk=busy.pk).update(status="running", heartbeat_at=timezone.now())
    TrainingRun.objects.filter(pk=done.pk).update(status="succeeded", heartbeat_at=quiet)
    assert training.training_runs_resume_stalled() == [stalled.pk]
    assert [options["kwargs"] for options in sent] == [{"run_id": stalled.pk}]
    assert sent[0]["queue"] == training.QUEUE
    stalled.refresh_from_db()
    assert stalled.status == "pending"
    assert pending.status == "pending"
    assert training.training_runs_resume_stalled() == []  # sent once


def _run_with_epochs(project, tmp_path, epochs: int = 6) -> TrainingRun:
    """A training of some seconds on the worker (the default model, about a second an
    epoch), early stopping off."""
    consensus_pairs_in(project, preference_pairs(240, seed=4))
    return training.training_run_create(
        project=project,
        options=TrainingOptions(epochs=epochs, batch_size=48, patience=epochs, seed=7),
        out_dir=str(tmp_path / "out"),
    )


def _wait(run: TrainingRun, done, *, timeout: float, log) -> TrainingRun:
    deadline = time.monotonic() + timeout
    while True:
        run.refresh_from_db()
        if done(run):
            return run
        assert run.status != "failed", run.error
        assert time.monotonic() < deadline, f"{run.status} {run.phase} {log()}"
        time.sleep(0.1)


def _assert_resumed_as_uninterrupted(run: TrainingRun, epochs_before: int) -> None:
    assert run.status == "succeeded", run.error
    meta = json.loads((Path(run.out_dir) / training.METRICS_FILE).read_text())
    assert meta["metrics"]["resumed_from_epoch"] >= epochs_before
    assert [row["epoch"] for row in run.history] == list(range(1, len(run.history) + 1))
    assert not training._state_path(run).exists()
    whole = train(training.training_data(run).pairs, training._options(run))
    assert [row["heldout_loss"] for row in run.history] == [m.heldout_loss for m in whole.history]
    assert_same_weights(load_checkpoint(run.checkpoint).state_dict(), whole.model.state_dict())


def _epochs_saved(n: int):
    """At least ``n`` epochs' state saved: an epoch's state is written after its metrics."""
    return lambda row: len(row.history) > n and training._state_path(row).exists()


@pytest.mark.timeout(180)
def test_a_training_whose_pool_process_is_killed_resumes_at_once(
    celery_worker_process, project, tmp_path
):
    worker = celery_worker_process(concurrency=1)
    run = _run_with_epochs(project, tmp_path)
    run = _wait(run, _epochs_saved(2), timeout=90, log=worker.log)
    holder = run.worker
    os.kill(int(holder.split(":")[1]), signal.SIGKILL)  # the pool process, not the worker

    # Delivered again at once, with a heartbeat still fresh: the claim sees its holder gone.
    run = _wait(run, lambda row: row.status == "succeeded", timeout=120, log=worker.log)
    assert run.worker != holder
    assert "taken over" in worker.log()
    assert "resumed after epoch" in worker.log()
    _assert_resumed_as_uninterrupted(run, epochs_before=2)


@pytest.mark.timeout(180)
def test_beat_resumes_a_training_whose_whole_worker_was_killed(
    celery_worker_process, project, tmp_path
):
    first = celery_worker_process(concurrency=1)
    run = _run_with_epochs(project, tmp_path)
    run = _wait(run, _epochs_saved(2), timeout=90, log=first.log)
    first.kill()
    run.refresh_from_db()
    assert run.status == "running"
    # Its job stays unacknowledged on the broker for the visibility timeout (an hour); the
    # time without a heartbeat that makes it stalled is stood in for by moving it back.
    TrainingRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=120)
    )
    second = celery_worker_process(
        concurrency=1,
        extra_env={"ARBITER_STALLED_AFTER_S": "60", "ARBITER_RESUME_STALLED_EVERY_S": "1"},
        beat=True,
    )
    try:
        run = _wait(run, lambda row: row.status == "succeeded", timeout=120, log=second.log)
    finally:  # the killed worker's unacknowledged job must not come back in later tests
        broker = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
        broker.delete("unacked", "unacked_index")
    assert "judges.training_runs_resume_stalled" in second.log()
    assert "resumed after epoch" in second.log()
    _assert_resumed_as_uninterrupted(run, epochs_before=2)
