from __future__ import annotations

import re
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from judges.models import TrainingRun
from judges.reward_model.options import DEVICES, FEATURE_KINDS, TrainingOptions
from judges.reward_model.report import heldout_report
from judges.reward_model.services import (
    training_release,
    training_run_create,
    training_run_execute,
    training_run_fail,
)

SOURCE = re.compile(r"^(?P<slug>[-a-zA-Z0-9_]+)(@(?P<version>\d+\.\d+\.\d+))?$")
BAR_WIDTH = 30
DEFAULTS = TrainingOptions()


class Command(BaseCommand):
    help = (
        "Train a reward model (Bradley-Terry loss) on a project's consensus pairs, A or B "
        "(ties are left out), or on a built release's rows (SLUG@X.Y.Z: its train split "
        "when it has one), and write DIR/model.pt and DIR/metrics.json; --register adds it "
        "as a reward_model judge of the project. See docs/reward-models.md."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", metavar="SLUG[@X.Y.Z]", help="the project (or release)")
        parser.add_argument("--out", required=True, metavar="DIR", help="folder to write to")
        parser.add_argument(
            "--features",
            choices=FEATURE_KINDS,
            default=DEFAULTS.features,
            help="text features: hashed words, or MiniLM sentence embeddings (the minilm "
            f"extra); default {DEFAULTS.features}",
        )
        parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs)
        parser.add_argument("--lr", type=float, default=DEFAULTS.lr, help="Adam's step size")
        parser.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size)
        parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
        parser.add_argument(
            "--patience",
            type=int,
            default=DEFAULTS.patience,
            help="stop after this many epochs without a better held-out accuracy",
        )
        parser.add_argument(
            "--holdout", type=float, default=DEFAULTS.holdout, help="share of prompts held out"
        )
        parser.add_argument("--device", choices=DEVICES, default=DEFAULTS.device)
        parser.add_argument(
            "--register",
            metavar="NAME",
            default="",
            help="register the checkpoint as a reward_model judge NAME (DIR must lie under "
            "ARBITER_CHECKPOINT_ROOT)",
        )

    def handle(self, *args, **options):
        match = SOURCE.match(options["source"])
        if match is None:
            raise CommandError(f"source: {options['source']!r} is not SLUG or SLUG@X.Y.Z")
        project = Project.objects.filter(slug=match["slug"]).first()
        if project is None:
            raise CommandError(f"source: no project with slug {match['slug']!r}")
        training = TrainingOptions(
            **{
                name: options[name]
                for name in ("features", "epochs", "lr", "batch_size", "seed", "patience")
            },
            device=options["device"],
            holdout=options["holdout"],
        )
        try:
            release = training_release(project, match["version"]) if match["version"] else None
            run = training_run_create(
                project=project,
                options=training,
                register_name=options["register"],
                release=release,
                # absolute: a relative one would be read from the checkpoint root when checked
                out_dir=str(Path(options["out"]).resolve()),
                enqueue=False,
            )
        except ValidationError as exc:
            lines = [f"  {f}: {' '.join(m)}" for f, m in exc.message_dict.items()]
            raise CommandError("Training not started:\n" + "\n".join(lines)) from None
        self.stdout.write(f"Training {run.pk} on {run.source_label} ({training.features})")
        self._tty = self.stdout.isatty()
        self._last_line = ""
        try:
            done = training_run_execute(run_id=run.pk, report=self._report)
        except BaseException as exc:  # Ctrl-C included: the run must not stay "running"
            training_run_fail(run_id=run.pk, error=f"{type(exc).__name__}: {exc}")
            raise
        if self._tty:
            self.stdout.write("")
        if done is None or done.status != TrainingRun.Status.SUCCEEDED:
            error = done.error if done is not None else "another worker took it"
            raise CommandError(f"Training failed: {error}")
        run = done
        registered = f"; registered as judge {run.judge.name}" if run.judge else ""
        heldout = heldout_report(accuracy=run.heldout_accuracy, pairs=run.heldout_pairs)
        self.stdout.write(
            self.style.SUCCESS(
                f"Trained on {run.train_pairs} pairs: best epoch {run.best_epoch}, {heldout}; "
                f"wrote {run.checkpoint}{registered}"
            )
        )
        if heldout is not None and heldout.too_few:
            self.stdout.write(self.style.WARNING(heldout.warning))

    def _report(self, run: TrainingRun) -> None:
        filled = int(BAR_WIDTH * run.progress)
        line = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {run.percent:>3}% {run.phase}"
        if run.history:
            last = run.history[-1]
            line += (
                f"  epoch {last['epoch']}: train loss {last['train_loss']:.4f}, held-out "
                f"loss {last['heldout_loss']:.4f}, accuracy {last['heldout_accuracy']:.3f}"
            )
        if line == self._last_line:
            return
        self._last_line = line
        self.stdout.write(line, ending="\r" if self._tty else "\n")
        self.stdout.flush()
