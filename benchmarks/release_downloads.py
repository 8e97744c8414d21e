"""A large release served (docs/releases.md, "Downloads", "CSV", "Diff"): loads synthetic
consensus pairs as ``release_speed.py`` does, builds and publishes release 1.0.0, relabels
and drops a few pairs and builds 1.1.0; then, in a fresh process each time, reads through
Django's request handling (the views the pages use, a logged-in researcher) the whole
archive, the CSV and the diff page, and times each with the process's peak RSS. Streaming
keeps the memory flat: neither the archive nor the CSV is ever whole in memory.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/release_downloads.py               # 100,000 pairs, 3 runs
    ... benchmarks/release_downloads.py --pairs 10000 --runs 1         # a quick look
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import time

from agreement_speed import measure_in_child, spread
from release_speed import delete, load, scratch_roots, setup_django

CHANGED_EVERY = 100  # 1% of the pairs are relabelled in 1.1.0, 1% dropped
SPLITS = "train=0.8,test=0.2"


def prepare(slug: str, pairs: int, seed: int) -> None:
    from annotation.models import Pair, PairStatus, Project, Role
    from annotation.projects.services import member_add
    from annotation.releases.services import release_build, release_create, release_publish

    load(kind="text", slug=slug, pairs=pairs, seed=seed)
    project = Project.objects.get(slug=slug)
    researcher = member_add(
        project=project, username=f"{slug}-researcher", role=Role.RESEARCHER
    ).membership.user
    first = release_create(
        project=project, version="1.0.0", selection={"splits": SPLITS}, user=None
    )
    release_publish(release=release_build(release=first), user=researcher)
    ids = list(
        Pair.objects.filter(project=project).order_by("external_id").values_list("pk", flat=True)
    )
    Pair.objects.filter(pk__in=ids[::CHANGED_EVERY]).update(consensus_label="B")
    Pair.objects.filter(pk__in=ids[1::CHANGED_EVERY]).update(status=PairStatus.DISPUTED)
    second = release_create(
        project=project, version="1.1.0", selection={"splits": SPLITS}, user=None
    )
    release_build(release=second)


def drop_releases(slug: str) -> None:
    """The benchmark's releases, published one included, by SQL: a published release refuses
    every delete through the model, and this throw-away project must go."""
    from django.db import connection

    from annotation.models import Project, Release

    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {Release._meta.db_table} WHERE project_id IN "
            f"(SELECT id FROM {Project._meta.db_table} WHERE slug = %s)",
            [slug],
        )


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM starts afresh at exec, whereas
    ``ru_maxrss`` keeps the peak of the parent the process was forked from."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(slug: str, what: str) -> dict:
    """In a process of its own: one GET through the test client, read to the end."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=f"{slug}-researcher"))
    path = {
        "archive": f"/p/{slug}/releases/1.0.0/download/",
        "csv": f"/p/{slug}/releases/1.0.0/csv/",
        "diff": f"/p/{slug}/releases/1.1.0/diff/?against=1.0.0",
    }[what]
    before_mb = peak_rss_mb()
    start = time.perf_counter()
    response = client.get(path)
    size = 0
    if response.streaming:
        for chunk in response.streaming_content:
            size += len(chunk)
    else:
        size = len(response.content)
    seconds = time.perf_counter() - start
    assert response.status_code == 200, (what, response.status_code)
    return {
        "seconds": seconds,
        "bytes": size,
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_mb": before_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3, help="reads of each, each in a new process")
    parser.add_argument("--measure", nargs=2, metavar=("SLUG", "WHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:
        setup_django()
        print(json.dumps(measure(*args.measure)))
        return
    scratch = scratch_roots("release-downloads-bench-")
    setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    slug = f"bench-downloads-{int(time.time())}"
    start = time.perf_counter()
    try:
        prepare(slug, args.pairs, args.seed)
        took = time.perf_counter() - start
        print(f"loaded {args.pairs:,} pairs, built 1.0.0 and 1.1.0 ({took:.0f} s)")
        for what in ("archive", "csv", "diff"):
            results = []
            for _ in range(args.runs):
                results.append(measure_in_child(__file__, slug, what))
            growth = [r["peak_rss_mb"] - r["rss_before_mb"] for r in results]
            print(
                f"{what}: {results[0]['bytes'] / 1e6:.1f} MB; seconds "
                f"{spread([r['seconds'] for r in results])}; peak RSS (MB) "
                f"{spread([r['peak_rss_mb'] for r in results])}, of which the request "
                f"{spread(growth)}"
            )
    finally:
        drop_releases(slug)
        delete(slug)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
