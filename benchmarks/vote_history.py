"""How fast an annotator's own history (My votes, docs/curators.md "An annotator's own
history") answers when they have 100,000 votes in the project.

Imports generated text pairs (``import_speed``'s generator) into a throw-away project on the
database named by DATABASE_URL, gives one annotator a vote on each (30 s apart, half the pairs
decided, the consensus shown) and a second annotator the same votes, then times through
Django's test client as the annotator: the page's first page, a page half-way back (its
``before`` cursor), a day's votes, the API's first page (with its count) and the speed. Each
is measured ``--runs`` times after one warm-up request; the median and spread are printed,
and the plan of the half-way page's query, which should walk ``vote_annotator_idx``
backwards and stop after a page.

    DATABASE_URL=postgres://... python benchmarks/vote_history.py --votes 100000 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import import_speed  # a sibling script, found through the path set above


def give_votes(project, annotators) -> None:
    """A vote by each annotator on every pair, newest on the highest id, 30 s apart; every
    other pair decided A."""
    from django.db import connection

    from annotation.models import Pair, Vote

    pairs, votes = Pair._meta.db_table, Vote._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {pairs} SET status = 'consensus', consensus_label = 'A' "
            "WHERE project_id = %s AND id %% 2 = 0",
            [project.pk],
        )
        for annotator in annotators:
            cursor.execute(
                f"""
                INSERT INTO {votes} (pair_id, annotator_id, side, value, left_is_a, rationale,
                  is_extra, is_adjudication, created_at)
                SELECT id, %s, 'A', 5, id %% 2 = 0, 'a reason', false, false,
                  now() - (max(id) OVER () - id) * interval '30 seconds'
                FROM {pairs} WHERE project_id = %s
                """,
                [annotator.pk, project.pk],
            )
        for table in (pairs, votes):
            cursor.execute(f"VACUUM (ANALYZE) {table}")


def time_get(client, url: str, runs: int, **params) -> list[float]:
    response = client.get(url, params)  # warm-up: the first request compiles templates
    assert response.status_code == 200, (url, params, response.status_code)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url, params)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, params, response.status_code)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        import_speed.setup_django(folder)
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from annotation.imports.importer import pairs_import
        from annotation.models import Membership, Project, Role, Vote
        from annotation.queue.history import HistoryFilter, own_votes

        path = Path(folder) / "pairs.jsonl"
        import_speed.write_text_pairs(path, args.votes)
        project = import_speed.new_project()
        users = [
            get_user_model().objects.create_user(f"bench-{name}-{project.slug}")
            for name in ("annotator", "other")
        ]
        try:
            pairs_import(project=project, source=path)
            Project.objects.filter(pk=project.pk).update(history_shows_consensus=True)
            give_votes(project, users)
            for user in users:
                Membership.objects.create(project=project, user=user, role=Role.ANNOTATOR)
            annotator = users[0]
            mine = own_votes(project=project, annotator=annotator)
            middle = mine.values_list("id", "created_at")[args.votes // 2]
            print(f"{args.votes:,} votes each for two annotators")
            print(
                own_votes(
                    project=project, annotator=annotator, history=HistoryFilter(before=middle[0])
                )[:51].explain(analyze=True, buffers=True)
            )
            client = Client()
            client.force_login(annotator)
            page = reverse("vote-history", args=[project.slug])
            day = middle[1].date().isoformat()
            timed = {
                "page: newest": (page, {}),
                "page: half-way back": (page, {"before": middle[0]}),
                "page: one day": (page, {"since": day, "until": day}),
                "API: first 100, counted": (reverse("api-my-votes", args=[project.slug]), {}),
                "API: speed": (reverse("api-my-speed", args=[project.slug]), {}),
            }
            print(f"{'request':<26} {'median ms':>10} {'spread ms':>16}")
            for name, (url, params) in timed.items():
                times = time_get(client, url, args.runs, **params)
                print(
                    f"{name:<26} {statistics.median(times):>10.1f} "
                    f"{min(times):>7.1f}-{max(times):<8.1f}"
                )
        finally:
            Vote.objects.filter(pair__project=project)._raw_delete(Vote.objects.db)
            import_speed.drop_project(project)
            for user in users:
                user.delete()


if __name__ == "__main__":
    main()
