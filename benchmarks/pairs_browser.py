"""How fast the pairs browser answers over 100,000 pairs (issue 9: a page in <= 150 ms on
PostgreSQL).

Imports generated text pairs (``import_speed``'s generator) into a throw-away project on the
database named by DATABASE_URL, spreads them over statuses, tasks and ensemble agreements, then
times each page through Django's test client as a curator: the first page, a filtered page, a
deep keyset page (half-way through, sorted by votes) and text searches (a rare word, a word
every prompt holds, a pair id). Each is measured ``--runs`` times (after one warm-up
request); the median and spread (min-max) are printed.

    DATABASE_URL=postgres://... python benchmarks/pairs_browser.py --pairs 100000 --runs 3
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

TARGET_MS = 150


def spread_pairs(project) -> None:
    """Statuses, tasks, criteria, votes and ensemble outcomes varied over the imported pairs."""
    from django.db import connection

    from annotation.models import Pair, Prompt

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Pair._meta.db_table} SET
              status = (ARRAY['imported', 'queued', 'annotating', 'easy'])[id %% 4 + 1],
              task = (ARRAY['t2i', 'edit', 'reasoning'])[id %% 3 + 1],
              vote_count = id %% 4,
              ensemble_label = CASE WHEN id %% 5 = 0 THEN '' ELSE 'A' END,
              ensemble_agreement = CASE WHEN id %% 5 = 0 THEN NULL ELSE (id %% 100) / 100.0 END
            WHERE project_id = %s
            """,
            [project.pk],
        )
        # What autovacuum does after a bulk load: without statistics the planner misjudges
        # how many pairs a filter keeps.
        for model in (Pair, Prompt):
            cursor.execute(f"VACUUM (ANALYZE) {model._meta.db_table}")


def time_page(client, url: str, runs: int) -> list[float]:
    response = client.get(url)  # warm-up: the first request compiles templates
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return times


def deep_page_url(client, base: str, project) -> str:
    """The URL of a page half-way through the pairs sorted by votes, found by its cursor."""
    from annotation.models import Pair
    from annotation.pairs.selectors import cursor_encode

    middle = Pair.objects.filter(project=project).order_by("vote_count", "id")
    row = middle.values_list("vote_count", "id")[middle.count() // 2]
    return f"{base}?sort=votes&after={cursor_encode(row[0], row[1])}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the project afterwards")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        import_speed.setup_django(folder)
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from annotation.imports.importer import pairs_import
        from annotation.models import Membership, Role

        path = Path(folder) / "pairs.jsonl"
        import_speed.write_text_pairs(path, args.pairs)
        project = import_speed.new_project()
        user = get_user_model().objects.create_user(f"bench-curator-{project.slug}")
        try:
            started = time.perf_counter()
            pairs_import(project=project, source=path)
            print(f"imported {args.pairs:,} pairs in {time.perf_counter() - started:.1f} s")
            spread_pairs(project)
            Membership.objects.create(project=project, user=user, role=Role.CURATOR)
            client = Client()
            client.force_login(user)
            base = reverse("pairs", args=[project.slug])
            pages = {
                "first page": base,
                "filtered page": f"{base}?status=queued&task=edit&votes_min=1&agreement_min=0.5",
                "deep keyset page": deep_page_url(client, base, project),
                "text search": f"{base}?q=Question+99999",
                "text search, common word": f"{base}?q=lorem&sort=-agreement",
                "text search, a pair id": f"{base}?q=text-4242",
            }
            print(f"{'page':<28} {'median ms':>10} {'spread ms':>16}  (target <= {TARGET_MS})")
            for name, url in pages.items():
                times = time_page(client, url, args.runs)
                verdict = "ok" if statistics.median(times) <= TARGET_MS else "SLOW"
                print(
                    f"{name:<28} {statistics.median(times):>10.1f} "
                    f"{min(times):>7.1f}-{max(times):<8.1f} {verdict}"
                )
        finally:
            if not args.keep:
                import_speed.drop_project(project)
            user.delete()


if __name__ == "__main__":
    main()
