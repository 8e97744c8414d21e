from __future__ import annotations

import json

from django.core.management.base import CommandError

from annotation.leaderboard.bradley_terry import BOOTSTRAP_ROUNDS, BOOTSTRAP_SEED
from annotation.leaderboard.selectors import MAX_BOOTSTRAP_ROUNDS, ModelSource, model_leaderboard
from annotation.management.projects import ProjectCommand


def _bound(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


class Command(ProjectCommand):
    help = (
        "Ranks a project's response models by Bradley-Terry strength from the human "
        "judgements, with bootstrap 95% intervals (docs/leaderboard.md)."
    )

    def add_project_arguments(self, parser):
        parser.add_argument(
            "--source",
            choices=ModelSource.values,
            default=ModelSource.CONSENSUS,
            help="consensus labels (one comparison per decided pair), every vote, or the "
            "reference labels that came with the import (default consensus)",
        )
        parser.add_argument("--task", default="", help="only the pairs of this task")
        parser.add_argument(
            "--rounds",
            type=int,
            default=BOOTSTRAP_ROUNDS,
            help=f"bootstrap rounds, 0 to {MAX_BOOTSTRAP_ROUNDS} (default {BOOTSTRAP_ROUNDS})",
        )
        parser.add_argument(
            "--seed", type=int, default=BOOTSTRAP_SEED, help="the bootstrap's seed (default 0)"
        )
        parser.add_argument("--json", action="store_true", help="print the leaderboard as JSON")

    def handle_project(self, project, **options):
        if not 0 <= options["rounds"] <= MAX_BOOTSTRAP_ROUNDS:
            raise CommandError(f"--rounds: between 0 and {MAX_BOOTSTRAP_ROUNDS}")
        if not 0 <= options["seed"] < 2**32:
            raise CommandError("--seed: between 0 and 2**32 - 1")
        board = model_leaderboard(
            project=project,
            source=options["source"],
            task=options["task"],
            rounds=options["rounds"],
            seed=options["seed"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(board.as_json(), indent=2))
            return
        scope = f", task {board.task}" if board.task else ""
        self.stdout.write(
            f"Models of {project.slug} ranked from {board.source}{scope}: {board.comparisons} "
            f"comparisons on {board.pairs} pairs ({board.same_model} of a model with itself "
            f"and {board.unnamed} without a model name left out)"
        )
        if not board.models:
            self.stdout.write("No comparison between two named models yet.")
        for place, row in enumerate(board.models, start=1):
            self.stdout.write(
                f"{place:>3}. {row.model:<32} {row.score:7.1f}  [{_bound(row.low)}, "
                f"{_bound(row.high)}]  {row.wins} wins, {row.losses} losses, {row.ties} ties"
            )
