"""The model leaderboard over the database (issue 18, "Speed"): loads 1,000,002 synthetic
ternary votes (333,334 pairs x 3 of 30 annotators) on pairs of 50 response models of known
Bradley-Terry strengths into PostgreSQL with COPY, then, in a fresh process each time, ranks
the models from every vote with 1,000 bootstrap rounds (``model_leaderboard`` with
``source="votes"``: the grouped query, the fit and the bootstrap) and times it with the
process's peak RSS; the fit and bootstrap alone are timed on the counts too.

Targets: <= 5 s and peak RSS < 1 GB.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/model_leaderboard.py              # the issue's sizes
    ... benchmarks/model_leaderboard.py --pairs 10000 --runs 1         # a quick look

The script migrates the database and creates a throw-away project (``bench-models-<time>``),
deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agreement_speed import (
    PAIR_COLUMNS,
    VOTE_COLUMNS,
    delete,
    measure_in_child,
    setup_django,
    spread,
)

MODELS = 50
ANNOTATORS = 30
TIE_SHARE = 0.1


def load(*, slug: str, pairs: int, seed: int) -> int:
    """The project, its annotators, one response per model, the pairs (each of two different
    models) and three votes each, drawn from the models' true strengths (COPY)."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    from annotation.core.content import prompt_id, response_id, text_part
    from annotation.models import Pair, PairStatus, Prompt, Response, Role, Vote
    from annotation.projects.services import member_add, project_create

    project = project_create(slug=slug, name=f"Model leaderboard benchmark {slug}")
    member_add(project=project, username=f"{slug}-researcher", role=Role.RESEARCHER)
    users = [
        member_add(project=project, username=f"{slug}-ann{n}", role=Role.ANNOTATOR).membership.user
        for n in range(ANNOTATORS)
    ]
    content = [text_part("Which answer is better?")]
    prompt = Prompt.objects.create(
        id=prompt_id(project.pk, content), project=project, content=content
    )
    responses = [
        Response.objects.create(
            id=response_id(project.pk, f"model-{m:02d}", content),
            project=project,
            model_name=f"model-{m:02d}",
            content=content,
        ).pk
        for m in range(MODELS)
    ]
    rng = np.random.default_rng(seed)
    strengths = rng.normal(0.0, 1.0, MODELS)
    model_a = rng.integers(0, MODELS, pairs)
    model_b = (model_a + rng.integers(1, MODELS, pairs)) % MODELS
    now = timezone.now()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {Pair._meta.db_table} ({PAIR_COLUMNS}) FROM STDIN") as copy:
            for n in range(pairs):
                copy.write_row(
                    (project.pk, f"bench-{n}", prompt.pk, responses[model_a[n]],
                     responses[model_b[n]], "", "text", "{}", PairStatus.ANNOTATING, 0, 3, 3, 0,
                     False, False, "", "", "", "{}", "", "", 0, now, now, "")
                )  # fmt: skip
        cursor.execute(
            f"SELECT id FROM {Pair._meta.db_table} WHERE project_id = %s ORDER BY id", [project.pk]
        )
        pair_ids = [row[0] for row in cursor.fetchall()]
        votes = 3 * pairs
        on = np.repeat(np.arange(pairs), 3)
        p = 1 / (1 + np.exp(-(strengths[model_a[on]] - strengths[model_b[on]])))
        # A tie one time in ten, taken evenly from both sides' chances.
        u = rng.random(votes)
        sides = np.where(u < TIE_SHARE, "tie", np.where(u < p + TIE_SHARE / 2, "A", "B"))
        values = np.select([sides == "A", sides == "B"], [3, 1], 2)
        first = rng.integers(0, ANNOTATORS, pairs)
        raters = (np.repeat(first, 3) + np.tile(np.arange(3), pairs)) % ANNOTATORS
        user_ids = [user.pk for user in users]
        with cursor.cursor.copy(f"COPY {Vote._meta.db_table} ({VOTE_COLUMNS}) FROM STDIN") as copy:
            for n, side, value, rater in zip(
                on.tolist(), sides.tolist(), values.tolist(), raters.tolist(), strict=True
            ):
                copy.write_row(
                    (pair_ids[n], user_ids[rater], side, value, True, "", 5000, False, False, now)
                )
        cursor.execute(f"ANALYZE {Pair._meta.db_table}, {Vote._meta.db_table}")
    return votes


def measure(slug: str) -> dict:
    """In a process of its own: the whole leaderboard from the database, then the fit and
    bootstrap again on the same counts."""
    from annotation.leaderboard.bradley_terry import rank_models
    from annotation.leaderboard.selectors import model_leaderboard
    from annotation.models import Project

    project = Project.objects.get(slug=slug)
    start = time.perf_counter()
    board = model_leaderboard(project=project, source="votes", rounds=1000)
    total_s = time.perf_counter() - start
    start = time.perf_counter()
    rank_models(board.outcomes, rounds=1000)
    fit_s = time.perf_counter() - start
    return {
        "total_s": total_s,
        "fit_s": fit_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "comparisons": board.comparisons,
        "models": len(board.models),
        "widest_interval": max(row.high - row.low for row in board.models),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=333_334)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3, help="leaderboards, each a new process")
    parser.add_argument("--keep", action="store_true", help="keep the project afterwards")
    parser.add_argument("--measure", metavar="SLUG", help=argparse.SUPPRESS)  # one run
    args = parser.parse_args()

    setup_django()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    slug = f"bench-models-{int(time.time())}"
    start = time.perf_counter()
    votes = load(slug=slug, pairs=args.pairs, seed=args.seed)
    print(f"loaded {votes:,} votes on {args.pairs:,} pairs ({time.perf_counter() - start:.1f} s)")
    try:
        results = []
        for run in range(args.runs):
            result = measure_in_child(__file__, slug)
            results.append(result)
            print(
                f"run {run + 1}: leaderboard {result['total_s']:.2f} s (fit and bootstrap "
                f"{result['fit_s']:.2f} s), peak RSS {result['peak_rss_mb']:.0f} MB, "
                f"{result['comparisons']:,} comparisons of {result['models']} models, widest "
                f"interval {result['widest_interval']:.1f} points"
            )
        print(f"leaderboard (s):     {spread([r['total_s'] for r in results])}  (target <= 5)")
        print(f"fit, bootstrap (s):  {spread([r['fit_s'] for r in results])}")
        print(
            f"peak RSS (MB):       {spread([r['peak_rss_mb'] for r in results])}  (target < 1024)"
        )
    finally:
        if not args.keep:
            delete(slug)


if __name__ == "__main__":
    main()
