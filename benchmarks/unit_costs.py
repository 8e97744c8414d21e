"""What one request costs each component (docs/scaling.md): a claim, a vote, a vote with next,
a media request (the whole file, and a 1 MiB Range) from local disk and from a bucket, and a
filter run's batch message on the broker (its CPU, its commands, the Redis memory it holds).

In this process, through the WSGI application as gunicorn calls it (production settings,
token authentication for the API, a logged-in session for media), with a private Redis as
the broker (started on a free loopback port, so its command counts are this run's alone) and
the bucket of benchmarks/bucket.py. For each request kind, per request: the web process's
CPU (``time.process_time`` around the request only), its PostgreSQL backend's CPU (from
/proc through psutil; PostgreSQL on this machine), the statements sent (Django's query
capture), the Redis commands the request issued (``INFO commandstats``), the bucket's
requests by operation and the bytes read from and written to it (every botocore call
counted), and the bytes answered. CPU time, not wall time: on a loaded machine it is the
steadier figure. ``--runs`` times each (3), the median and spread printed as JSON lines.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/unit_costs.py                  # 300 votes, 3 runs
    ... benchmarks/unit_costs.py --votes 100 --runs 1 --storage local   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
SLUG = "bench-unit-costs"
MIB = 1024 * 1024
BUCKET_CALLS: Counter[str] = Counter()  # operation name -> calls; "read"/"written" -> bytes


@contextlib.contextmanager
def private_redis() -> Iterator[str]:
    """A redis-server of this run's own on a free loopback port; yields its URL."""
    import redis

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = tempfile.mkdtemp(prefix="unit-costs-redis-")
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    server = subprocess.Popen([*command, "--dir", folder], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise SystemExit("the private redis-server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


@functools.cache
def redis_client(url: str):
    import redis

    return redis.Redis.from_url(url)


def redis_commands(url: str) -> int:
    """Commands the server has run, less the ones this benchmark sends to read them (its one
    connection, kept open, says nothing more once it has been set up)."""
    stats = redis_client(url).info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_ping"))


def count_bucket_calls() -> None:
    """Counts every S3 call any boto3 client in this process makes, with the bytes moved."""
    from botocore.client import BaseClient

    original = BaseClient._make_api_call

    def counted(self, operation: str, params: dict):
        BUCKET_CALLS["written"] += body_size(params.get("Body"))
        answer = original(self, operation, params)
        BUCKET_CALLS[operation] += 1
        if operation == "GetObject":
            BUCKET_CALLS["read"] += int(answer.get("ContentLength") or 0)
        return answer

    BaseClient._make_api_call = counted


def body_size(body) -> int:
    """The bytes an upload sends from where its body stands."""
    if isinstance(body, bytes | bytearray):
        return len(body)
    if body is None or not hasattr(body, "seek"):
        return 0
    start = body.tell()
    end = body.seek(0, os.SEEK_END)
    body.seek(start)
    return int(end or 0) - start


class Meter:
    """Adds up what each measured request costs; ``report`` gives the costs per request."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.totals: dict[str, Counter[str]] = {}

    @staticmethod
    def backend_cpu() -> tuple[int | None, float]:
        """This process's PostgreSQL backend and the CPU seconds it has used so far (the
        connection is reopened after a request where Django's connection age says so)."""
        from django.db import connection

        if connection.connection is None:
            return None, 0.0
        pid = connection.connection.info.backend_pid
        try:
            return pid, sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.NoSuchProcess:
            return None, 0.0

    def measure(self, kind: str, request: Callable[[], int]) -> None:
        """Runs ``request`` (which returns the bytes it was answered) and books its cost."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        connection.ensure_connection()
        redis_before = redis_commands(self.redis_url)
        bucket_before = Counter(BUCKET_CALLS)
        backend_before = self.backend_cpu()
        with CaptureQueriesContext(connection) as captured:
            started = time.process_time()
            answered = request()
            cpu = time.process_time() - started
        backend, backend_cpu = self.backend_cpu()
        if backend == backend_before[0]:
            backend_cpu -= backend_before[1]
        total = self.totals.setdefault(kind, Counter())
        total["requests"] += 1
        total["web_cpu_us"] += round(cpu * 1e6)
        total["postgres_cpu_us"] += round(backend_cpu * 1e6)
        total["statements"] += len(captured.captured_queries)
        total["redis_commands"] += redis_commands(self.redis_url) - redis_before
        total["answered_bytes"] += answered
        for name, value in (Counter(BUCKET_CALLS) - bucket_before).items():
            total[f"bucket_{name}"] += value

    def report(self) -> dict[str, dict[str, float]]:
        per: dict[str, dict[str, float]] = {}
        for kind, total in self.totals.items():
            count = total["requests"]
            per[kind] = {"requests": count}
            for name, value in sorted(total.items()):
                if name.endswith("_us"):
                    per[kind][name.replace("_us", "_ms")] = round(value / count / 1000, 3)
                elif name != "requests":
                    per[kind][name] = round(value / count, 3)
        return per


def api_post(application, path: str, body: dict, token: str) -> tuple[int, dict, int]:
    from vote_profile import wsgi_post

    code, answer = wsgi_post(application, path, body, token)
    return code, answer, len(json.dumps(answer))


def measure_queue(meter: Meter, application, *, votes: int) -> None:
    """Votes with next (the loop's one round trip), then votes and claims apart (two calls)."""
    from annotator_load import analyze_as_autovacuum_would, create_fixture
    from django.db import connection

    tokens = create_fixture(slug=SLUG, pairs=2 * votes + 100, overlap=3, annotators=3)
    with connection.cursor() as cursor:
        analyze_as_autovacuum_would(cursor)
    current: dict[str, dict] = {}

    def claim(token: str) -> int:
        code, current[token], size = api_post(
            application, f"/api/v1/projects/{SLUG}/claim/", {}, token
        )
        if code != 200:
            raise SystemExit(f"claim answered {code}")
        return size

    def vote(token: str, *, then_next: bool) -> int:
        body = {"choice": "left", "time_on_task_ms": 4000, "next": then_next}
        path = f"/api/v1/assignments/{current[token]['id']}/vote/"
        code, answer, size = api_post(application, path, body, token)
        if code != 201:
            raise SystemExit(f"vote answered {code}: {answer}")
        if then_next:
            current[token] = answer["next"]
        return size

    for token in tokens:
        claim(token)
    for turn in range(30):  # unmeasured: each URL module imported, each statement prepared
        vote(tokens[turn % 3], then_next=True)
    for turn in range(votes):  # the annotators take turns: one vote in three ends its pair
        token = tokens[turn % 3]
        meter.measure("vote_with_next", functools.partial(vote, token, then_next=True))
    for turn in range(votes):
        token = tokens[turn % 3]
        meter.measure("vote", functools.partial(vote, token, then_next=False))
        meter.measure("claim", functools.partial(claim, token))


def measure_media(meter: Meter, where: str, *, mb: int, requests: int) -> None:
    """The whole file and 1 MiB ranges of it, as a browser playing a video asks for them."""
    from media_range import write_media

    size = mb * 1_000_000
    project, media, user = write_media(size, seed=time.time_ns())
    try:
        fetch_media(meter, where, project=project, media=media, user=user, requests=requests)
    finally:
        from annotation.models import ProjectMedia

        ProjectMedia.objects.filter(media=media).delete()
        media.delete()


def fetch_media(meter: Meter, where: str, *, project, media, user, requests: int) -> None:
    from django.test import Client

    from annotation.core.media_keys import media_path

    size = media.size_bytes
    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)
    url = media_path(slug=project.slug, sha256=media.sha256)
    rng = random.Random(0)

    def fetch(asked: str = "") -> int:
        response = client.get(url, headers={"range": asked} if asked else None)
        if response.status_code not in (200, 206):
            raise SystemExit(f"{url} {asked}: answered {response.status_code}")
        streamed: Iterator[bytes] = getattr(response, "streaming_content")  # noqa: B009
        return sum(len(part) for part in streamed)

    fetch("bytes=0-0")  # unmeasured: the size asked once per process
    for _ in range(requests):
        meter.measure(f"media_full_{where}", fetch)
    for _ in range(requests * 4):
        start = rng.randrange(0, size - MIB)
        asked = f"bytes={start}-{start + MIB - 1}"
        meter.measure(f"media_range_{where}", functools.partial(fetch, asked))


def measure_broker(meter: Meter, redis_url: str, *, messages: int) -> None:
    """A filter run's batch messages, as ``judges.runs.services`` queues them (50 pairs in
    both orders a batch), sent to a queue no worker reads: the commands and CPU a message
    costs, and the memory it holds in Redis while it waits (``MEMORY USAGE`` of the queue)."""
    from django.conf import settings

    from annotation.core.jobs import job_publish
    from judges.runs.services import BATCH_TASK, ORDERS

    queue = "unit-costs-unread"
    size = 2 * settings.ARBITER_JUDGE_BATCH_PAIRS
    items = [[1_000_000 + i // 2, ORDERS[i % 2]] for i in range(size)]
    client = redis_client(redis_url)
    client.delete(queue)

    def publish(attempt: int) -> int:
        kwargs = {"run_id": 1, "judge_id": 1, "items": items, "attempt": attempt}
        job_publish(BATCH_TASK, kwargs=kwargs, queue=queue, after_commit=False)
        return 0

    for attempt in range(messages):
        meter.measure("judge_batch_message", functools.partial(publish, attempt + 1))
    held = client.memory_usage(queue, samples=0) or 0
    meter.totals["judge_batch_message"]["redis_bytes_held"] += round(held)
    client.delete(queue)


def one_run(args, redis_url: str, bucket: dict[str, str]) -> dict[str, dict[str, float]]:
    """Each request kind measured once; ``bucket`` is the bucket's environment."""
    from annotator_load import delete_project
    from bucket import use_storage
    from django.core.wsgi import get_wsgi_application
    from media_range import _cleanup

    meter = Meter(redis_url)
    try:
        measure_queue(meter, get_wsgi_application(), votes=args.votes)
    finally:
        delete_project(SLUG)
    measure_broker(meter, redis_url, messages=args.messages)
    for where in args.storage or ("local", "s3"):
        use_storage(bucket if where == "s3" else {})
        try:
            _cleanup()
            measure_media(meter, where, mb=args.mb, requests=args.media_requests)
        finally:
            _cleanup()
    return meter.report()


def summarise(runs: list[dict[str, dict[str, float]]]) -> Iterator[dict]:
    """Per request kind and figure: the median and the spread over the runs."""
    for kind in runs[0]:
        line: dict = {"kind": kind, "runs": len(runs)}
        for name in runs[0][kind]:
            values = [run[kind].get(name, 0) for run in runs]
            line[name] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }
        yield line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=300, help="votes measured a loop")
    parser.add_argument("--mb", type=int, default=10, help="the media file's size, MB")
    parser.add_argument(
        "--media-requests", type=int, default=20, help="whole-file fetches (4 times as many ranges)"
    )
    parser.add_argument("--messages", type=int, default=200, help="filter-run batches queued")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--storage", choices=("local", "s3"), action="append")
    args = parser.parse_args()
    from annotator_load import setup_django
    from bucket import bucket_environment
    from release_speed import scratch_roots
    from vote_profile import production_environment

    production_environment()
    scratch = scratch_roots("unit-costs-")
    with private_redis() as redis_url:
        os.environ["CELERY_BROKER_URL"] = redis_url
        setup_django()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        count_bucket_calls()
        server, bucket = bucket_environment() if "s3" in (args.storage or ["s3"]) else (None, {})
        try:
            runs = []
            for number in range(args.runs):
                runs.append(one_run(args, redis_url, bucket))
                print(json.dumps({"run": number + 1, **runs[-1]}), flush=True)
            for line in summarise(runs):
                print(json.dumps(line), flush=True)
        finally:
            if server is not None:
                server.stop()
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
