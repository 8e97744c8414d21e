"""How fast a judge is evaluated when its verdicts are cached (issue 11, "Speed": 10,000 pairs
in <= 5 s).

Creates a throw-away project (``bench-judgeval-<time>``) with PAIRS pairs in consensus over
four tasks, a few criteria and same-model pairs, a ``scores`` judge and a finished filter run
holding its verdict on every pair in both orders (about 75% right, with confidences). Then
times ``judge_evaluation_create`` RUNS times: it reads the target and the cached verdicts, finds
nothing missing (no judge call), scores dual, without-ties, with-ties and tie-calibrated
accuracy, position consistency and the per-task, per-criterion and model-pair breakdowns, each
with 1,000 bootstrap resamples, and stores the results. Prints each run, the median and the
spread (max - min).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/judge_eval_speed.py [--pairs 10000] [--runs 3] [--keep]

Without DATABASE_URL it runs on Arbiter's own PostgreSQL in var/postgres. The project and judge are
deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("t2i", "edit", "interleaved", "reasoning")
CRITERIA = ("", "", "", "Judge only the text rendering", "Judge only the composition")
TARGET_S = 5.0


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()


def load(*, slug: str, pairs: int, seed: int):
    """The project, its pairs in consensus, the judge and its cached verdicts."""
    from annotation.core.content import prompt_id, response_id, text_part
    from annotation.models import Pair, PairStatus, Prompt, Response
    from annotation.projects.services import project_create
    from judges.models import FilterRun, Judge, Verdict

    rng = random.Random(seed)
    project = project_create(slug=slug, name=f"Judge evaluation benchmark {slug}", scale="ternary")
    content = [text_part("Which image follows the prompt better?")]
    prompt = Prompt.objects.create(
        id=prompt_id(project.pk, content), project=project, content=content
    )
    responses = []
    for model, text in (("model-a", "one"), ("model-b", "two"), ("model-a", "three")):
        body = [text_part(text)]
        responses.append(
            Response.objects.create(
                id=response_id(project.pk, model, body),
                project=project,
                model_name=model,
                content=body,
            )
        )
    labels = rng.choices(("A", "B", "tie"), weights=(45, 45, 10), k=pairs)
    Pair.objects.bulk_create(
        [
            Pair(
                project=project,
                external_id=f"bench-{n:06d}",
                prompt=prompt,
                response_a=responses[0],
                response_b=responses[1 if n % 4 else 2],  # every fourth pair: the same model
                task=TASKS[n % len(TASKS)],
                criterion=CRITERIA[n % len(CRITERIA)],
                status=PairStatus.CONSENSUS,
                consensus_label=label,
                target_votes=3,
                vote_count=3,
            )
            for n, label in enumerate(labels)
        ],
        batch_size=2000,
    )
    judge = Judge.objects.create(name=slug, kind="scores")
    run = FilterRun.objects.create(project=project, number=1, status="succeeded")
    run.judges.set([judge])
    verdicts = []
    pairs = Pair.objects.filter(project=project).order_by("pk")
    for pk, label in pairs.values_list("pk", "consensus_label"):
        for order in ("AB", "BA"):
            side = label if label != "tie" and rng.random() < 0.75 else rng.choice("AB")
            verdicts.append(
                Verdict(
                    run=run,
                    judge=judge,
                    pair_id=pk,
                    order=order,
                    outcome="ok",
                    side=side,
                    confidence=round(rng.uniform(0.5, 1.0), 3),
                )
            )
    Verdict.objects.bulk_create(verdicts, batch_size=5000)
    return project, judge


def delete(slug: str) -> None:
    """Removes the benchmark's project and judge: verdicts and pairs first, then the rest."""
    from annotation.models import Pair, Project, Prompt, Response
    from judges.models import Judge, Verdict

    project = Project.objects.filter(slug=slug).first()
    if project is not None:
        Verdict.objects.filter(run__project=project).delete()
        project.evaluations.all().delete()
        project.filter_runs.all().delete()
        Pair.objects.filter(project=project).delete()
        Prompt.objects.filter(project=project).delete()
        Response.objects.filter(project=project).delete()
        project.delete()
    Judge.objects.filter(name=slug).delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the project and judge")
    parser.add_argument("--delete", metavar="SLUG", help="only delete a kept benchmark project")
    args = parser.parse_args()
    setup_django()
    from django.core.management import call_command
    from django.db import connection

    from judges.evaluation.services import judge_evaluation_create

    call_command("migrate", verbosity=0)
    if args.delete:
        delete(args.delete)
        return
    slug = f"bench-judgeval-{int(time.time())}"
    started = time.perf_counter()
    project, judge = load(slug=slug, pairs=args.pairs, seed=args.seed)
    print(
        f"{connection.vendor}: {args.pairs} pairs, {2 * args.pairs} cached verdicts loaded in "
        f"{time.perf_counter() - started:.1f} s"
    )
    try:
        times = []
        for run in range(1, args.runs + 1):
            started = time.perf_counter()
            evaluation = judge_evaluation_create(judge=judge, project=project)
            elapsed = time.perf_counter() - started
            times.append(elapsed)
            overall = evaluation.results["overall"]
            print(
                f"run {run}: {elapsed:.2f} s ({evaluation.status}, {evaluation.calls} calls; "
                f"scoring {evaluation.results['seconds']:.2f} s; dual accuracy "
                f"{overall['dual_accuracy']['value']:.3f})"
            )
        median = statistics.median(times)
        print(
            f"median {median:.2f} s, spread {max(times) - min(times):.2f} s over {len(times)} "
            f"runs; target <= {TARGET_S:g} s: {'met' if median <= TARGET_S else 'MISSED'}"
        )
    finally:
        if not args.keep:
            delete(slug)


if __name__ == "__main__":
    main()
