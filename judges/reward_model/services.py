"""Reward-model training runs (docs/reward-models.md): create one (its options, source and
judge name checked; the job enqueued on the ``training`` queue once the transaction
commits), execute it (claim, read the pairs, train, write the checkpoint and its metrics,
register the judge), resume the runs whose worker died (Celery beat's sweep) and record a
failure. Only this module writes ``TrainingRun`` rows."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.core import storage
from annotation.core.jobs import (
    BrokerUnavailable,
    StalledJobs,
    job_attempt_claim,
    job_attempts_spent,
    job_publish,
    quarantine_reason,
    stalled_before,
)
from annotation.core.scratch import SCRATCH_PREFIX
from annotation.models import Pair, PairStatus, Project, Release, Side
from config.queues import TRAINING
from judges.models import Judge, TrainingRun
from judges.reward_model.checkpoint import AREA as CHECKPOINT_AREA
from judges.reward_model.checkpoint import CheckpointError, checkpoint_path
from judges.reward_model.data import (
    TrainingData,
    TrainingDataError,
    consensus_pairs,
    release_pairs,
)
from judges.reward_model.options import TrainingOptions, options_errors
from judges.roster.services import judge_create

if TYPE_CHECKING:
    from judges.reward_model.trainer import EpochMetrics, TrainingResult

logger = logging.getLogger(__name__)

QUEUE = TRAINING  # torch work goes where the GPU workers listen (docs/deploy.md)
# The task that trains (judges/tasks.py registers it by this name).
TRAINING_TASK = "judges.training_run_execute"
CHECKPOINT_FILE = "model.pt"
METRICS_FILE = "metrics.json"
STATE_FILE = "resume-{run}.pt"  # the state after the last epoch, removed once the run is over
PROGRESS_EVERY_S = 1.0  # at most one progress write a second between epochs
# Share of the progress bar the one-off MiniLM embedding of the texts takes.
PREPARE_SHARE = 0.2
JUDGE_NAME_MAX = 80  # Judge.name's max_length


def default_out_dir(project: Project, run_id: int) -> Path:
    return Path(settings.ARBITER_CHECKPOINT_ROOT) / _stored_folder(project, run_id)


def _stored_folder(project: Project, run_id: int) -> str:
    """A run's folder in the ``checkpoints`` area (under ARBITER_CHECKPOINT_ROOT on disk)."""
    return f"trained/{project.slug}/run-{run_id}"


def _to_bucket(run: TrainingRun) -> bool:
    """Whether the run's checkpoint goes to the bucket: with ARBITER_STORAGE=s3, unless the
    command line named a folder of its own (``--out``)."""
    return storage.is_s3() and not run.out_dir


def _out_dir(run: TrainingRun) -> Path:
    """Where the run writes: its folder, or, when it goes to the bucket, a local work folder
    named after the run (so a run resumed on this node finds its state; swept when a worker
    starts, core/scratch.py), uploaded at the end."""
    if run.out_dir:
        return Path(run.out_dir)
    if _to_bucket(run):
        return Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}training-run-{run.pk}"
    return default_out_dir(run.project, run.pk)


def _store(run: TrainingRun, out: Path) -> str:
    """The checkpoint's location for the judge: its path on disk, or, uploaded to the
    bucket's ``checkpoints`` area with its metrics (the local folder then removed), its name
    there."""
    if not _to_bucket(run):
        return str(out / CHECKPOINT_FILE)
    folder = _stored_folder(run.project, run.pk)
    for name in (CHECKPOINT_FILE, METRICS_FILE):
        storage.put_file(CHECKPOINT_AREA, f"{folder}/{name}", out / name)
    shutil.rmtree(out, ignore_errors=True)
    return f"{folder}/{CHECKPOINT_FILE}"


def _state_path(run: TrainingRun) -> Path:
    return _out_dir(run) / STATE_FILE.format(run=run.pk)


def _options(run: TrainingRun) -> TrainingOptions:
    return TrainingOptions(
        features=run.features,
        epochs=run.epochs,
        lr=run.lr,
        batch_size=run.batch_size,
        seed=run.seed,
        patience=run.patience,
        device=run.device,
        holdout=run.holdout,
    )


def training_release(project: Project, version: str) -> Release:
    """The project's release ``version``, built or published; ``ValidationError`` on
    ``source`` otherwise."""
    release = Release.objects.filter(project=project, version=version).first()
    if release is None:
        raise ValidationError({"source": f"{project.slug} has no release {version}."})
    if release.status not in (Release.Status.BUILT, Release.Status.PUBLISHED):
        raise ValidationError(
            {
                "source": f"Release {release} is {release.status}: only a built or published "
                "release has files to train on."
            }
        )
    return release


def check_training(
    *,
    project: Project,
    options: TrainingOptions,
    register_name: str = "",
    release: Release | None = None,
    out_dir: str = "",
) -> None:
    """Raises ``ValidationError`` naming each field that stops this training from starting."""
    errors: dict[str, str] = dict(options_errors(options))
    if options.features == "minilm" and "features" not in errors:
        from judges.reward_model.minilm import MiniLMUnavailable, weights_version

        try:
            weights_version()
        except MiniLMUnavailable as exc:
            errors["features"] = str(exc)
    if release is not None:
        if release.project_id != project.pk:
            errors["source"] = f"Release {release} is not of {project.slug}."
    elif not Pair.objects.filter(
        project=project,
        status=PairStatus.CONSENSUS,
        is_gold=False,
        consensus_label__in=[Side.A, Side.B],
    ).exists():
        errors["source"] = (
            f"{project.slug} has no consensus pair with a side (A or B) yet; ties and "
            "undecided pairs are not training pairs."
        )
    if register_name:
        if Judge.objects.filter(name=register_name).exists():
            errors["register"] = f"A judge named {register_name!r} exists already."
        else:
            try:
                validate_slug(register_name)
            except ValidationError:
                errors["register"] = (
                    "A judge name is a slug: letters, digits, hyphens and underscores."
                )
            if len(register_name) > JUDGE_NAME_MAX:
                errors["register"] = "A judge name has at most 80 characters."
        if out_dir and "register" not in errors:
            try:
                checkpoint_path(out_dir)
            except CheckpointError as exc:
                errors["out"] = f"To register it as a judge, {exc}."
    if errors:
        raise ValidationError(errors)


def training_run_create(
    *,
    project: Project,
    options: TrainingOptions,
    register_name: str = "",
    release: Release | None = None,
    out_dir: str = "",
    created_by=None,
    enqueue: bool = True,
) -> TrainingRun:
    """Checks the training (``check_training``) and records it, pending. With ``enqueue``
    the job goes to the ``training`` queue once the transaction commits; when the broker
    cannot take it, the run is failed and BrokerUnavailable says so. Without it the caller
    runs ``training_run_execute`` itself (the command line does)."""
    check_training(
        project=project,
        options=options,
        register_name=register_name,
        release=release,
        out_dir=out_dir,
    )
    run = TrainingRun.objects.create(
        project=project,
        created_by=created_by,
        source=TrainingRun.Source.RELEASE if release else TrainingRun.Source.CONSENSUS,
        release=release,
        out_dir=out_dir,
        register_name=register_name,
        **options.as_dict(),
    )
    if enqueue:

        def refused(exc: BrokerUnavailable) -> None:
            training_run_fail(run_id=run.pk, error=f"{exc} The training did not start.")
            raise BrokerUnavailable(
                f"Training {run.pk} failed: {exc} Try again once the task queue is back."
            ) from exc

        _publish_training(run, on_refused=refused, after_commit=True)
    return run


def _publish_training(run: TrainingRun, *, after_commit: bool = False, on_refused=None) -> None:
    """Sends the run's job to the ``training`` queue, at once unless ``after_commit``."""
    job_publish(
        TRAINING_TASK,
        kwargs={"run_id": run.pk},
        queue=QUEUE,
        after_commit=after_commit,
        on_refused=on_refused,
    )


def _process_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22); "" when
    there is no such process or no /proc to ask."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def worker_token() -> str:
    """This process as a claim records it: ``host:pid:start``. The start time tells a process
    from a later one given the same pid (a restarted container counts from 1 again)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}"


def holder_gone(token: str) -> bool:
    """Whether the process a claim recorded has provably ended: it ran on this host, and no
    process with its pid and start time is alive. A holder on another host, or one recorded
    without a start time, cannot be proved gone (the sweep waits for its heartbeat instead)."""
    host, _, rest = token.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit() or not start:
        return False
    return _process_start(int(pid)) != start


def _claim(run_id: int) -> bool:
    """Moves the run to running for this process: from pending; from running when its worker
    has not written progress for ARBITER_STALLED_AFTER_S; or at once when the process that
    held it has ended (a pool process killed, say by the out-of-memory killer: its job is
    delivered again at once, with a heartbeat still fresh)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.ARBITER_STALLED_AFTER_S)
    fields = {
        "status": TrainingRun.Status.RUNNING,
        "worker": worker_token(),
        "started_at": Coalesce("started_at", now),
        "heartbeat_at": now,
        "phase": "reading pairs",
        "error": "",
    }
    claimable = Q(status=TrainingRun.Status.PENDING) | (
        Q(status=TrainingRun.Status.RUNNING) & (Q(heartbeat_at__lt=stale) | Q(heartbeat_at=None))
    )
    if _claim_attempt(TrainingRun.objects.filter(claimable, pk=run_id), fields):
        return True
    holder = (
        TrainingRun.objects.filter(pk=run_id, status=TrainingRun.Status.RUNNING)
        .values_list("worker", flat=True)
        .first()
    )
    if not holder or holder == fields["worker"] or not holder_gone(holder):
        return False
    taken = _claim_attempt(
        TrainingRun.objects.filter(pk=run_id, status=TrainingRun.Status.RUNNING, worker=holder),
        fields,
    )
    if taken:
        logger.warning("training %s taken over: its holder %s is gone", run_id, holder)
    return taken


def _claim_attempt(runs, fields: dict) -> bool:
    """Takes the run in ``runs`` (filtered to those this process may take), counting the
    attempt before any work; a run that may be taken but is out of attempts is quarantined."""
    if job_attempt_claim(runs, **fields):
        return True
    spent = runs.values_list("pk", "attempts").first()
    if spent is not None:
        training_run_fail(run_id=spent[0], error=quarantine_reason(spent[1]))
    return False


class Superseded(Exception):
    """Another worker has taken the run over (this one had gone quiet): this one stops."""


class _Progress:
    """Writes a run's progress: each epoch's metrics at once, the bar at most once a second."""

    def __init__(self, run: TrainingRun, report: Callable[[TrainingRun], None] | None):
        self.run, self.report, self.last_write = run, report, 0.0
        self.worker = run.worker

    def write(self, *, force: bool = False, **fields) -> None:
        for name, value in fields.items():
            setattr(self.run, name, value)
        now = time.monotonic()
        if force or now - self.last_write >= PROGRESS_EVERY_S:
            self.last_write = now
            self.run.heartbeat_at = timezone.now()
            written = TrainingRun.objects.filter(
                pk=self.run.pk, status=TrainingRun.Status.RUNNING, worker=self.worker
            ).update(
                heartbeat_at=self.run.heartbeat_at,
                **{name: getattr(self.run, name) for name in ("progress", "phase", "history")},
            )
            if not written:
                raise Superseded(f"training {self.run.pk} is no longer this worker's")
        if self.report is not None:
            self.report(self.run)

    def prepared(self, done: int, total: int) -> None:
        self.write(progress=PREPARE_SHARE * done / max(1, total), phase="embedding texts")

    def step(self, done: int, total: int) -> None:
        start = PREPARE_SHARE if self.run.features == "minilm" else 0.0
        self.write(progress=start + (1 - start) * done / total, phase="training")

    def epoch(self, metrics: EpochMetrics) -> None:
        self.write(history=[*self.run.history, asdict(metrics)], force=True)

    def start(self, history: list[EpochMetrics]) -> None:
        """The epochs read back from the saved state (none on a fresh start) replace the
        run's history: epochs after the state's, from before a kill, are run again."""
        if history:
            logger.info("training %s resumed after epoch %s", self.run.pk, len(history))
        self.write(
            history=[asdict(metrics) for metrics in history],
            phase=f"resumed after epoch {len(history)}" if history else "training",
            force=True,
        )


def training_data(run: TrainingRun) -> TrainingData:
    """The pairs ``run`` learns from: its release's rows, or the project's consensus."""
    if run.release is not None:
        return release_pairs(run.release)
    return consensus_pairs(run.project)


def training_run_execute(
    *, run_id: int, report: Callable[[TrainingRun], None] | None = None
) -> TrainingRun | None:
    """Trains the run's model, writes ``model.pt`` and ``metrics.json`` to its folder and
    registers the judge when asked. Returns None when the run is gone or another worker has
    it. A data problem fails the run with its message; ``report(run)`` sees each update."""
    # Here, not at the top: only the worker that trains loads torch (the web side creates
    # and shows runs with this module).
    from judges.reward_model.model import save_checkpoint
    from judges.reward_model.trainer import train

    if not _claim(run_id):
        return None
    run = TrainingRun.objects.select_related("project", "release__project").get(pk=run_id)
    progress = _Progress(run, report)
    state = _state_path(run)
    try:
        progress.write(force=True)
        data = training_data(run)
        run.source_info = data.source
        TrainingRun.objects.filter(pk=run.pk).update(source_info=data.source)
        result = train(
            data.pairs,
            _options(run),
            on_prepare=progress.prepared,
            on_step=progress.step,
            on_epoch=progress.epoch,
            on_start=progress.start,
            state_path=state,
        )
    except Superseded as exc:
        logger.warning("%s: stopped", exc)
        return None
    except (TrainingDataError, CheckpointError) as exc:
        training_run_fail(run_id=run.pk, error=str(exc))
        run.refresh_from_db()
        return run
    try:
        progress.write(progress=1.0, phase="saving", force=True)
    except Superseded as exc:
        logger.warning("%s: stopped", exc)
        return None
    out = _out_dir(run)
    best = result.best
    metrics = {
        "best_epoch": result.best_epoch,
        "heldout_accuracy": best.heldout_accuracy,
        "heldout_loss": best.heldout_loss,
        "train_pairs": result.train_pairs,
        "heldout_pairs": result.heldout_pairs,
        "stopped_early": result.stopped_early,
        "resumed_from_epoch": result.resumed_from_epoch,
        "history": run.history,
    }
    meta = {
        "source": data.source,
        "training_run": run.pk,
        "options": _options(run).as_dict(),
        "metrics": metrics,
        "trained_at": timezone.now().isoformat(),
    }
    save_checkpoint(result.model, out / CHECKPOINT_FILE, config=result.config, meta=meta)
    (out / METRICS_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    state.unlink(missing_ok=True)
    path = _store(run, out)
    try:
        _succeed(run, result, path)
    except ValidationError as exc:  # the name was taken while it trained
        training_run_fail(
            run_id=run.pk,
            error=f"Saved {path}, but the judge was not registered: {' '.join(exc.messages)}",
        )
        run.refresh_from_db()
    if report is not None:
        report(run)
    return run


@transaction.atomic
def _succeed(run: TrainingRun, result: TrainingResult, path: str) -> None:
    """Registers the judge (when asked) and records the run's results, in one transaction."""
    if run.register_name:
        run.judge = judge_create(
            name=run.register_name,
            kind=Judge.Kind.REWARD_MODEL,
            checkpoint=path,
            device=run.device,
            projects=[run.project],
        )
    run.status = TrainingRun.Status.SUCCEEDED
    run.phase = ""
    run.checkpoint = path
    run.best_epoch = result.best_epoch
    run.heldout_accuracy = result.best.heldout_accuracy
    run.train_pairs, run.heldout_pairs = result.train_pairs, result.heldout_pairs
    run.finished_at = timezone.now()
    run.save(
        update_fields=[
            "status",
            "phase",
            "checkpoint",
            "judge",
            "best_epoch",
            "heldout_accuracy",
            "train_pairs",
            "heldout_pairs",
            "finished_at",
        ]
    )


def training_run_fail(*, run_id: int, error: str) -> None:
    """Marks an unfinished run failed with ``error`` (a task's final failure comes here) and
    removes its saved state: a failed run is not resumed."""
    TrainingRun.objects.filter(pk=run_id).exclude(status=TrainingRun.Status.SUCCEEDED).update(
        status=TrainingRun.Status.FAILED, error=error, phase="", finished_at=timezone.now()
    )
    run = TrainingRun.objects.select_related("project").filter(pk=run_id).first()
    if run is not None and run.status == TrainingRun.Status.FAILED:
        _state_path(run).unlink(missing_ok=True)
        if _to_bucket(run):  # its local work folder holds nothing more
            shutil.rmtree(_out_dir(run), ignore_errors=True)


def stalled_training_runs():
    """Running trainings with no progress for ARBITER_STALLED_AFTER_S: their worker died (a
    whole worker killed keeps its job unacknowledged until the broker's visibility timeout)."""
    return TrainingRun.objects.filter(status=TrainingRun.Status.RUNNING).filter(
        Q(heartbeat_at__lt=stalled_before()) | Q(heartbeat_at=None)
    )


class _StalledTrainings(StalledJobs[TrainingRun]):
    """Each stalled training goes back to pending and its job is sent again; its worker
    resumes it after its last completed epoch; one out of attempts is quarantined instead.
    The move to pending is the sweep's claim, so two sweeps send it once; when the broker
    cannot take the job the run goes back to running, still stalled, for the next sweep."""

    noun = "training"

    def stalled(self):
        return stalled_training_runs().order_by("pk")

    def claim(self, job):
        return (
            stalled_training_runs()
            .filter(pk=job.pk, worker=job.worker)
            .update(status=TrainingRun.Status.PENDING, phase="queued again", worker="")
        )

    def recover(self, job):
        if job_attempts_spent(job.attempts):
            training_run_fail(run_id=job.pk, error=quarantine_reason(job.attempts))
            return "quarantined"
        _publish_training(job)
        return None

    def unclaim(self, job, claim):
        TrainingRun.objects.filter(pk=job.pk, status=TrainingRun.Status.PENDING).update(
            status=TrainingRun.Status.RUNNING, phase=job.phase, worker=job.worker
        )


STALLED_TRAININGS = _StalledTrainings()


def training_runs_resume_stalled() -> list[int]:
    """Celery beat's sweep (``_StalledTrainings``); returns the ids sent again."""
    return STALLED_TRAININGS.sweep()
