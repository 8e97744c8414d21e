"""What the metrics cost a request: the time of a request through Django's whole middleware
stack with django-prometheus's two middlewares and without them, in one process, alternating,
and what a vote's and a claim's counter add. Run it twice to compare prometheus-client's
modes: as it is, and with PROMETHEUS_MULTIPROC_DIR set to an empty folder (each count is
then written to a memory-mapped file).

    .venv/bin/python benchmarks/metrics_overhead.py [--requests 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client
    from django.test.utils import override_settings

    from annotation.core.metrics import CLAIMS, VOTES

    without = [name for name in settings.MIDDLEWARE if not name.startswith("django_prometheus")]
    client = Client()

    def per_request_us(middleware: list[str]) -> float:
        with override_settings(MIDDLEWARE=middleware):
            client.get("/healthz")
            started = time.perf_counter()
            for _ in range(args.requests):
                client.get("/healthz")
            return (time.perf_counter() - started) / args.requests * 1e6

    def per_count_us() -> float:
        started = time.perf_counter()
        for _ in range(args.requests):
            VOTES.labels("counted").inc()
            CLAIMS.labels("new").inc()
        return (time.perf_counter() - started) / args.requests * 1e6

    mode = "multiprocess" if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else "one process"
    rows = {"with": [], "without": [], "counters": []}
    for _ in range(args.rounds):
        rows["with"].append(per_request_us(settings.MIDDLEWARE))
        rows["without"].append(per_request_us(without))
        rows["counters"].append(per_count_us())
    print(f"prometheus-client mode: {mode}; {args.requests} requests a round, {args.rounds} rounds")
    for name, values in rows.items():
        label = {"with": "request, metrics on", "without": "request, metrics off"}.get(
            name, "a vote's and a claim's counters"
        )
        print(
            f"{label:34} median {statistics.median(values):7.1f} us "
            f"(min {min(values):.1f}, max {max(values):.1f})"
        )


if __name__ == "__main__":
    main()
