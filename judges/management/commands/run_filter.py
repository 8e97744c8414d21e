from __future__ import annotations

import time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from annotation.core.jobs import BrokerUnavailable
from annotation.management.projects import ProjectCommand
from annotation.models import PairStatus, Project
from judges.ensemble import DEFAULT_EASY_THRESHOLD, easy_rule
from judges.models import FilterRun
from judges.roster.selectors import judges_for_project
from judges.runs.selectors import filter_run_progress, filter_run_report
from judges.runs.services import filter_run_create, filter_run_resume

BAR_WIDTH = 30


class Command(ProjectCommand):
    help = (
        "Start a filter run: the judges vote on the project's imported pairs in both orders; "
        "easy pairs are filtered out, the rest are queued for annotators."
    )

    def add_project_arguments(self, parser):
        parser.add_argument(
            "--judges",
            help="comma-separated judge names (default: every enabled judge the project may use)",
        )
        parser.add_argument(
            "--threshold",
            type=float,
            default=DEFAULT_EASY_THRESHOLD,
            help=f"easy share of valid votes (0.5, 1]; default {DEFAULT_EASY_THRESHOLD:g}",
        )
        parser.add_argument(
            "--min-votes",
            type=int,
            help="a pair is easy only with at least this many valid votes (skipped judges, "
            "errors and unparseable answers give none); default: one per judge",
        )
        parser.add_argument(
            "--budget", type=int, help="queue only the N most contested pairs per task"
        )
        parser.add_argument("--wait", action="store_true", help="show progress until it ends")
        parser.add_argument(
            "--resume",
            type=int,
            metavar="NUMBER",
            help="resume the project's run of this number (Run 3: 3) instead of a new one",
        )
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
        parser.add_argument(
            "--stall-seconds",
            type=float,
            default=settings.ARBITER_STALLED_AFTER_S,
            help="with --wait, resume the run when no verdict arrived for this long "
            "(default: ARBITER_STALLED_AFTER_S)",
        )

    def handle_project(self, project, **options):
        try:
            run = self._run(project, options)
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from None
        except BrokerUnavailable as exc:
            raise CommandError(str(exc)) from None
        progress = filter_run_progress(run)
        judges = len(progress["judges"])
        self.stdout.write(
            f"Filter run {run.number} on {project.slug}: {run.pairs.count()} pairs x "
            f"{judges} judges x 2 orders = {progress['expected']} verdicts; a pair is "
            f"{easy_rule(threshold=run.threshold, judges=judges, min_votes=run.min_valid_votes)}"
        )
        if not options["wait"]:
            return
        self._wait(run, options["interval"], options["stall_seconds"])
        self._summary(run)

    def _run(self, project: Project, options) -> FilterRun:
        if options["resume"]:
            run = FilterRun.objects.filter(project=project, number=options["resume"]).first()
            if run is None:
                raise CommandError(f"No filter run {options['resume']} in {project.slug}")
            filter_run_resume(run=run)
            return run
        available = judges_for_project(project)
        if options["judges"]:
            names = [name.strip() for name in options["judges"].split(",") if name.strip()]
            # A judge the project may not use is unknown to it, like a name that does not exist.
            judges = {j.name: j for j in available.filter(name__in=names)}
            if unknown := [name for name in names if name not in judges]:
                raise CommandError(f"--judges: unknown judges {', '.join(unknown)}")
            chosen = [judges[name] for name in dict.fromkeys(names)]
        else:
            chosen = list(available.filter(enabled=True))
        if not project.pairs.filter(status=PairStatus.IMPORTED).exists():
            raise CommandError(f"{project.slug} has no imported pairs to judge")
        return filter_run_create(
            project=project,
            judges=chosen,
            threshold=options["threshold"],
            budget_per_task=options["budget"],
            min_valid_votes=options["min_votes"],
        )

    def _wait(self, run: FilterRun, interval: float, stall_seconds: float) -> None:
        tty = self.stdout.isatty()
        last_done, last_change = -1, time.monotonic()
        while True:
            run.refresh_from_db()
            progress = filter_run_progress(run)
            if progress["done"] != last_done:
                last_done, last_change = progress["done"], time.monotonic()
                self.stdout.write(_bar(progress), ending="\r" if tty else "\n")
                self.stdout.flush()
            if run.finished:
                break
            if time.monotonic() - last_change > stall_seconds:
                try:
                    enqueued = filter_run_resume(run=run)
                except BrokerUnavailable as exc:
                    self.stderr.write(f"\nNo verdict for {stall_seconds:g}s; not resumed: {exc}")
                else:
                    self.stdout.write(
                        f"\nNo verdict for {stall_seconds:g}s: resumed, {enqueued} calls "
                        "re-enqueued"
                    )
                last_change = time.monotonic()
            time.sleep(interval)
        if tty:
            self.stdout.write("")

    def _summary(self, run: FilterRun) -> None:
        report = filter_run_report(run)
        if run.status != FilterRun.Status.SUCCEEDED:
            raise CommandError(f"Filter run {run.number} {run.status}. {run.error}".strip())
        pairs = report["pairs"]
        self.stdout.write(
            self.style.SUCCESS(
                f"Filter run {run.number} succeeded: {pairs['pairs']} pairs, {pairs['easy']} easy, "
                f"{pairs['queued']} queued, {pairs['returned']} over budget (imported again), "
                f"{pairs['no_votes']} without a valid vote, {pairs['too_few_votes']} with "
                f"fewer than {run.min_valid_votes} valid votes"
            )
        )
        header = (
            f"{'judge':<24} {'verdicts':>9} {'agreement':>9} {'consistent':>10} "
            f"{'unparseable':>11} {'errors':>6} {'abstain':>7} {'skipped':>7} {'median ms':>9}"
        )
        self.stdout.write(header)
        for judge in report["judges"]:
            self.stdout.write(
                f"{judge['name']:<24} {judge['done']:>9} {_pct(judge['agreement']):>9} "
                f"{_pct(judge['position_consistency']):>10} {judge['unparseable']:>11} "
                f"{judge['error']:>6} {judge['abstain']:>7} {judge['skipped']:>7} "
                f"{_num(judge['median_latency_ms']):>9}"
            )
        for judge in report["judges"]:
            for reason in judge["reasons"]:
                self.stdout.write(
                    f"{judge['name']}: {reason['count']} {reason['outcome']}: {reason['reason']}"
                )
        unseen = report["unseen"]
        if unseen["count"]:
            self.stdout.write(
                self.style.WARNING(
                    f"{unseen['count']} pairs no judge could see (every judge skipped them): "
                    + ", ".join(p["external_id"] for p in unseen["pairs"])
                    + (" ..." if unseen["count"] > len(unseen["pairs"]) else "")
                )
            )


def _bar(progress: dict) -> str:
    share = progress["done"] / progress["expected"] if progress["expected"] else 0
    filled = int(BAR_WIDTH * share)
    judges = "  ".join(f"{j['name']} {j['done']}/{j['expected']}" for j in progress["judges"])
    return (
        f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {progress['done']}/{progress['expected']}"
        f" {progress['percent']:>3}%  {judges}"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)
