"""The agreement report over the database (issue 8, "Speed"): loads 1,000,002 synthetic likert6
votes (333,334 pairs x 3 of 30 annotators, on four tasks) into PostgreSQL with COPY, then, in
a fresh process each time, builds and caches the whole report (bootstrap intervals included)
and times it with the process's peak RSS, times reading the cached report through the API
(``GET /api/v1/projects/{slug}/agreement/``), and times the Agreement page
(``/p/{slug}/agreement/``: the cached report drawn as charts and tables), both through
Django's test client in the same process, so without the network.

Targets: the report in <= 10 s with peak RSS < 1 GB; the API's cached read and the page in
<= 50 ms each.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/agreement_speed.py                 # the issue's sizes
    ... benchmarks/agreement_speed.py --pairs 10000 --runs 1            # a quick look

The script migrates the database and creates a throw-away project (``bench-agreement-<time>``),
deleted afterwards unless ``--keep``. Votes come from ``agreement_stats.synthetic_votes``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("t2i", "edit", "interleaved", "reasoning")
# The columns the benchmarks COPY pairs and votes into, in the order their rows give them.
PAIR_COLUMNS = (
    "project_id, external_id, prompt_id, response_a_id, response_b_id, criterion, task, "
    "metadata, status, priority, target_votes, vote_count, lease_count, restricted, "
    "is_gold, gold_label, prior_label, ensemble_label, ensemble_summary, "
    "consensus_label, dispute_reason, extra_slots, created_at, updated_at, search_words"
)
VOTE_COLUMNS = (
    "pair_id, annotator_id, side, value, left_is_a, rationale, time_on_task_ms, is_extra, "
    "is_adjudication, created_at"
)
API_READS = 20
PAGE_READS = 20


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()


def load(*, slug: str, pairs: int, annotators: int, seed: int) -> int:
    """The project, its researcher, annotators, pairs and votes (COPY); returns the votes."""
    import numpy as np
    from agreement_stats import synthetic_votes
    from django.db import connection
    from django.utils import timezone

    from annotation.core.content import prompt_id, response_id, text_part
    from annotation.models import Pair, PairStatus, Prompt, Response, Role, Vote
    from annotation.projects.services import member_add, project_create

    project = project_create(slug=slug, name=f"Agreement benchmark {slug}", scale="likert6")
    member_add(project=project, username=f"{slug}-researcher", role=Role.RESEARCHER)
    users = [
        member_add(project=project, username=f"{slug}-ann{n}", role=Role.ANNOTATOR).membership.user
        for n in range(annotators)
    ]
    content = [text_part("Which image follows the prompt better?")]
    prompt = Prompt.objects.create(
        id=prompt_id(project.pk, content), project=project, content=content
    )
    sides = [
        Response.objects.create(
            id=response_id(project.pk, model, content),
            project=project,
            model_name=model,
            content=content,
        )
        for model in ("model-a", "model-b")
    ]
    votes = synthetic_votes(pairs=pairs, annotators=annotators, seed=seed)
    now = timezone.now()
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {Pair._meta.db_table} ({PAIR_COLUMNS}) FROM STDIN") as copy:
            for n in range(pairs):
                copy.write_row(
                    (project.pk, f"bench-{n}", prompt.pk, sides[0].pk, sides[1].pk, "",
                     TASKS[n % len(TASKS)], "{}", PairStatus.ANNOTATING, 0, 3, 3, 0, False,
                     False, "", "", "", "{}", "", "", 0, now, now, "")
                )  # fmt: skip
        cursor.execute(
            f"SELECT id FROM {Pair._meta.db_table} WHERE project_id = %s ORDER BY id", [project.pk]
        )
        pair_ids = np.array([row[0] for row in cursor.fetchall()])
        user_ids = np.array([user.pk for user in users])
        values = votes["values"]
        rows = zip(
            pair_ids[np.arange(len(values)) // 3].tolist(),
            user_ids[votes["raters"] - 1].tolist(),
            np.where(values >= 4, "A", "B").tolist(),
            values.tolist(),
            votes["time_on_task_ms"].astype(int).tolist(),
            strict=True,
        )
        with cursor.cursor.copy(f"COPY {Vote._meta.db_table} ({VOTE_COLUMNS}) FROM STDIN") as copy:
            for pair_id, user_id, side, value, ms in rows:
                copy.write_row((pair_id, user_id, side, value, True, "", ms, False, False, now))
        # Fresh statistics, as autovacuum gives tables soon after a bulk load.
        cursor.execute(f"ANALYZE {Pair._meta.db_table}, {Vote._meta.db_table}")
    return len(values)


def delete(slug: str) -> None:
    """Removes the benchmark's project; a million votes go by SQL, not through the ORM."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from annotation.models import Pair, Project, Prompt, Response, Vote

    project = Project.objects.filter(slug=slug).first()
    if project is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {Vote._meta.db_table} WHERE pair_id IN "
            f"(SELECT id FROM {Pair._meta.db_table} WHERE project_id = %s)",
            [project.pk],
        )
        cursor.execute(f"DELETE FROM {Pair._meta.db_table} WHERE project_id = %s", [project.pk])
    Prompt.objects.filter(project=project).delete()
    Response.objects.filter(project=project).delete()
    project.delete()
    get_user_model().objects.filter(username__startswith=f"{slug}-").delete()


def measure(slug: str) -> dict:
    """In a process of its own: build and cache the report, then read it through the API."""
    from django.test import Client
    from rest_framework.test import APIClient

    from annotation.agreement.services import agreement_report_recompute
    from annotation.models import Project

    project = Project.objects.get(slug=slug)
    start = time.perf_counter()
    report = agreement_report_recompute(project=project)
    build_s = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from django.contrib.auth import get_user_model

    researcher = get_user_model().objects.get(username=f"{slug}-researcher")
    api = APIClient()
    api.force_authenticate(researcher)
    reads = []
    for _ in range(API_READS):
        start = time.perf_counter()
        response = api.get(f"/api/v1/projects/{slug}/agreement/")
        reads.append(time.perf_counter() - start)
        assert response.status_code == 200, response.content
    browser = Client()
    browser.force_login(researcher)
    pages = []
    for _ in range(PAGE_READS):
        start = time.perf_counter()
        page = browser.get(f"/p/{slug}/agreement/")
        pages.append(time.perf_counter() - start)
        assert page.status_code == 200, page.content[:500]
    return {
        "build_s": build_s,
        "peak_rss_mb": peak_mb,
        "read_ms": statistics.median(reads) * 1000,
        "page_ms": statistics.median(pages) * 1000,
        "page_bytes": len(page.content),
        "votes": report.data["votes"],
        "alpha_side": report.data["krippendorff_alpha"]["side"],
        "bytes": len(response.content),
    }


def measure_in_child(script: str, *args: str) -> dict:
    """Runs ``script --measure ARGS`` in a fresh process (so its peak RSS is its own) and
    returns the JSON object its last line printed."""
    child = subprocess.run(
        [sys.executable, script, "--measure", *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(child.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}, min {min(values):.2f}, max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=333_334)
    parser.add_argument("--annotators", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3, help="report builds, each a new process")
    parser.add_argument("--keep", action="store_true", help="keep the project afterwards")
    parser.add_argument("--measure", metavar="SLUG", help=argparse.SUPPRESS)  # one run
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    setup_django()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    slug = f"bench-agreement-{int(time.time())}"
    start = time.perf_counter()
    votes = load(slug=slug, pairs=args.pairs, annotators=args.annotators, seed=args.seed)
    print(f"loaded {votes:,} votes on {args.pairs:,} pairs ({time.perf_counter() - start:.1f} s)")
    try:
        results = []
        for run in range(args.runs):
            result = measure_in_child(__file__, slug)
            results.append(result)
            print(
                f"run {run + 1}: report {result['build_s']:.2f} s, peak RSS "
                f"{result['peak_rss_mb']:.0f} MB, cached read {result['read_ms']:.1f} ms "
                f"({result['bytes']:,} bytes; alpha side {result['alpha_side']:.4f}), "
                f"page {result['page_ms']:.1f} ms ({result['page_bytes']:,} bytes)"
            )
        print(f"report (s):        {spread([r['build_s'] for r in results])}  (target <= 10)")
        print(f"peak RSS (MB):     {spread([r['peak_rss_mb'] for r in results])}  (target < 1024)")
        print(f"cached read (ms):  {spread([r['read_ms'] for r in results])}  (target <= 50)")
        print(f"page (ms):         {spread([r['page_ms'] for r in results])}  (target <= 50)")
    finally:
        if not args.keep:
            delete(slug)


if __name__ == "__main__":
    main()
