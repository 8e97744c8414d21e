from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.core.jobs import BrokerUnavailable
from annotation.management.projects import command_project
from judges.evaluation.judgement_import import judgements_import_text
from judges.evaluation.scoring import DEFAULT_SEED
from judges.evaluation.selectors import evaluation_summary
from judges.evaluation.services import judge_evaluation_create
from judges.models import JudgeEvaluation
from judges.roster.selectors import judges_for_project


class Command(BaseCommand):
    help = (
        "Score a judge against a project's current consensus (--project SLUG), a release "
        "(--release SLUG@X.Y.Z) or its imported reference labels (--reference SLUG): dual "
        "accuracy, accuracy without and with ties, tie-calibrated "
        "accuracy, position consistency, with 95%% bootstrap intervals. Answers on hand are "
        "reused; only missing ones are asked of the judge."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the judge's name")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--project", metavar="SLUG", help="the project's current consensus")
        target.add_argument("--release", metavar="SLUG@X.Y.Z", help="a published release")
        target.add_argument(
            "--reference",
            metavar="SLUG",
            help="the project's reference labels (an imported chosen or criteria_preference)",
        )
        parser.add_argument(
            "--import",
            dest="import_file",
            metavar="FILE",
            help="first import the judge's answers from this file: JSONL (pair, order, "
            "verdict or score) or MMRB2's prediction JSON (pair id: forward, reverse)",
        )
        parser.add_argument(
            "--no-calls",
            action="store_true",
            help="score only the answers on hand; missing ones count as no vote",
        )
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")
        parser.add_argument(
            "--timeout", type=float, default=3600.0, help="seconds to wait for the judge calls"
        )
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between polls")

    def handle(self, *args, **options):
        slug, release = options["project"], ""
        if options["reference"]:
            slug, release = options["reference"], JudgeEvaluation.REFERENCE
        elif options["release"]:
            slug, sep, release = options["release"].partition("@")
            if not sep or not release:
                raise CommandError("--release must be SLUG@X.Y.Z")
        project = command_project(slug)
        judge = judges_for_project(project).filter(name=options["name"]).first()
        if judge is None:
            raise CommandError(f"No judge {options['name']!r} for project {slug}")
        try:
            if options["import_file"]:
                path = Path(options["import_file"])
                try:
                    text = path.read_text(encoding="utf-8")
                    count = judgements_import_text(judge=judge, project=project, text=text)
                except OSError as exc:
                    raise CommandError(f"{path}: {exc.strerror}") from None
                except UnicodeDecodeError:
                    raise CommandError(f"{path}: not UTF-8 text") from None
                self.stderr.write(f"Imported {count} judgements for {judge.name}.")
            evaluation = judge_evaluation_create(
                judge=judge,
                project=project,
                release=release,
                seed=options["seed"],
                call=not options["no_calls"],
            )
        except ValidationError as exc:
            raise CommandError("\n".join(exc.messages)) from None
        except BrokerUnavailable as exc:
            raise CommandError(str(exc)) from None
        evaluation = self._wait(evaluation, options)
        if evaluation.status != JudgeEvaluation.Status.SUCCEEDED:
            raise CommandError(f"The evaluation {evaluation.status}: {evaluation.error}")
        summary = evaluation_summary(evaluation)
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
            return
        overall = evaluation.results["overall"]
        self.stdout.write(f"{judge.name} on {evaluation.target_name}: {summary['pairs']} pairs")
        for key in (
            "dual_accuracy",
            "dual_accuracy_strict",
            "accuracy_without_ties",
            "accuracy_with_ties",
        ):
            self.stdout.write(f"  {key}: {_share(overall[key])}")
        self.stdout.write(f"  position_consistency: {_share(overall['position_consistency'])}")
        tie = evaluation.results.get("tie_calibrated")
        if tie:
            self.stdout.write(
                f"  tie_calibrated: {tie['accuracy']:.1%} at margin {tie['margin']:.3g}"
            )
        self.stdout.write(f"  judge calls made: {evaluation.calls}")

    def _wait(self, evaluation: JudgeEvaluation, options) -> JudgeEvaluation:
        deadline = time.monotonic() + options["timeout"]
        while not evaluation.finished:
            if time.monotonic() > deadline:
                raise CommandError(
                    f"Evaluation {evaluation.pk} still running after {options['timeout']:g} s; "
                    "run the command again: answers already given are kept."
                )
            time.sleep(options["interval"])
            evaluation.refresh_from_db()
        return evaluation


def _share(metric: dict) -> str:
    if metric["value"] is None:
        return "n/a"
    interval = ""
    if metric["low"] is not None:
        interval = f" (95% {metric['low']:.1%} to {metric['high']:.1%})"
    answered = ""
    if metric.get("answered") is not None:
        on = metric["on_answered"]
        answered = f"; answered {metric['answered']:.1%}" + (
            f", {on:.1%} on those" if on is not None else ""
        )
    return f"{metric['value']:.1%}{interval} of {metric['n']}{answered}"
