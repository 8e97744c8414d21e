"""Annotators under load: N annotators each loop over the REST API against gunicorn and
PostgreSQL, then the database is checked for what must never happen. Prints votes/s, claim
and vote latency (p50/p95), CPU per vote (gunicorn, PostgreSQL, the load generator),
statements per claim, vote and vote-with-next, pairs over target, duplicate votes.

Two loops (``--loop``): ``next`` (the default) votes with ``"next": true``, one request a vote
whose answer carries the next assignment (docs/api.md); ``two-calls`` claims, then votes, as
clients did before, and as older servers need. The first ``--warmup`` seconds run the loop
without being measured: each gunicorn worker imports its URL modules on its first request,
and a long-running server has done so long before.

Targets (8 annotators, 30 s, gunicorn with 4 workers, a 2-core machine, 10,000 and 1,000,000
queued pairs): >= 20x Label Studio's votes/s under the same load generator (``--label-studio``
runs it right after, from ``benchmarks/label_studio_load.py``), claim and vote p95 each under a
tenth of Label Studio's, CPU per vote <= 12 ms, 0 pairs over target, 0 duplicate votes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/annotator_load.py            # the issue's sizes
    ... benchmarks/annotator_load.py --duration 5 --pairs 1000   # a quick look

The script migrates the database, creates a throw-away project (``bench-load-<time>``),
its pairs, annotators and API tokens, and starts the server itself, as production runs it:

    ARBITER_ENV=production DJANGO_SECRET_KEY=... DJANGO_ALLOWED_HOSTS=127.0.0.1 \\
    DJANGO_SECURE_SSL_REDIRECT=false ARBITER_LOG_LEVEL=WARNING DATABASE_URL=... \\
    python -m gunicorn config.wsgi --workers 4 --bind 127.0.0.1:8765

(production settings: DEBUG off, persistent database connections; TLS is a proxy's job, so
the redirect is off for plain HTTP on loopback). For a measurement, run it on a quiet machine
with nothing else using the CPUs; PostgreSQL on the same machine as in the targets; and on a
fresh database: where autovacuum is off (as on the development machine), tables that other
benchmarks filled and emptied keep their dead rows, and the loop's queries walk them (one
run on such a database gave 14.5x where fresh ones gave 23 to 27x). With
``--url`` it drives a server you started yourself (on the same database) instead. The project
is deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
from loop_report import Measured, percentile, print_measured

ROOT = Path(__file__).resolve().parent.parent


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    import django

    django.setup()


# Beyond this many pairs the fixture COPYs the rest, reusing the first pairs' content.
DISTINCT_CONTENT = 20_000


def copy_more_pairs(*, project, first: list, total: int) -> None:
    """Queued pairs ``len(first)`` to ``total`` by COPY (a million in about a minute), each
    with the content of one of ``first``: the claim's index lookups do not read content."""
    from agreement_speed import PAIR_COLUMNS  # the benchmarks' one list of the pair columns
    from django.db import connection
    from django.utils import timezone

    from annotation.models import Pair, PairStatus

    now = timezone.now()
    with connection.cursor() as cursor:
        copy_sql = f"COPY {Pair._meta.db_table} ({PAIR_COLUMNS}) FROM STDIN"
        with cursor.cursor.copy(copy_sql) as copy:
            for n in range(len(first), total):
                like = first[n % len(first)]
                copy.write_row(
                    (project.pk, f"load-{n}", like.prompt_id, like.response_a_id,
                     like.response_b_id, "", "", "{}", PairStatus.QUEUED, 0, like.target_votes,
                     0, 0, False, False, "", "", "", "{}", "", "", 0, now, now, "")
                )  # fmt: skip


def create_fixture(*, slug: str, pairs: int, overlap: int, annotators: int) -> list[str]:
    """The project, its queued text pairs and annotators; returns the annotators' API tokens.
    Up to ``DISTINCT_CONTENT`` pairs have content of their own; more are COPYed."""
    from rest_framework.authtoken.models import Token

    from annotation.core.content import prompt_id, response_id, text_part
    from annotation.models import Pair, PairStatus, Prompt, Response, Role
    from annotation.projects.services import member_add, project_create

    total, pairs = pairs, min(pairs, DISTINCT_CONTENT)
    project = project_create(slug=slug, name=f"Load benchmark {slug}", overlap=overlap)
    prompts, responses, rows = [], [], []
    for i in range(pairs):
        prompt_content = [text_part(f"Question {i}: which answer explains it better?")]
        prompt = Prompt(id=prompt_id(project.pk, prompt_content), project=project)
        prompt.content = prompt_content
        sides = []
        for model in (f"model-{i % 5}", f"model-{(i + 2) % 5}"):
            content = [text_part(f"{model} answers question {i} at some length. " * 4)]
            response = Response(
                id=response_id(project.pk, model, content),
                project=project,
                model_name=model,
                content=content,
            )
            responses.append(response)
            sides.append(response)
        prompts.append(prompt)
        rows.append(
            Pair(
                project=project,
                external_id=f"load-{i}",
                prompt=prompt,
                response_a=sides[0],
                response_b=sides[1],
                status=PairStatus.QUEUED,
                target_votes=overlap,
            )
        )
    Prompt.objects.bulk_create(prompts, batch_size=2000)
    Response.objects.bulk_create(responses, batch_size=2000)
    Pair.objects.bulk_create(rows, batch_size=2000)
    if total > pairs:
        copy_more_pairs(project=project, first=rows, total=total)
    tokens = []
    for n in range(annotators):
        added = member_add(project=project, username=f"{slug}-ann{n}", role=Role.ANNOTATOR)
        tokens.append(Token.objects.get_or_create(user=added.membership.user)[0].key)
    return tokens


def start_server(
    *, port: int, workers: int, worker_class: str, threads: int = 1, extra_env: dict | None = None
) -> subprocess.Popen:
    env = {
        **os.environ,
        **(extra_env or {}),
        "ARBITER_ENV": "production",
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "load-benchmark-only-" + "x" * 40),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "ARBITER_LOG_LEVEL": "WARNING",
        # The API serves no static files; point WhiteNoise at a folder that exists.
        "DJANGO_STATIC_ROOT": os.environ.get("DJANGO_STATIC_ROOT", str(ROOT / "static")),
    }
    env.pop("DJANGO_DEBUG", None)
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi",
        "--workers",
        str(workers),
        "--worker-class",
        worker_class,
        "--threads",
        str(threads),
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    # Generous: on a loaded machine each worker's first request imports every URL module.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            return server
        except httpx.TransportError:
            if server.poll() is not None:
                raise SystemExit("gunicorn exited during start-up") from None
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("gunicorn did not answer within 90 s")


@dataclass
class LoopAnswer:
    status_code: int
    content: bytes

    def json(self):
        return json.loads(self.content)


class LoopClient:
    """The annotators' HTTP client, here and in label_studio_load.py: the standard library's
    ``http.client`` on one connection, opened again when the server closed it (gunicorn's
    sync workers close each after its answer). The load generator shares the machine's cores
    with the server it measures, so what it spends is taken from the server: measured alone
    against a WSGI application that answers at once, this takes 158 µs of CPU a request
    where ``httpx.Client`` took 410 (benchmarks/README.md, "... a lighter load generator")."""

    def __init__(self, base_url: str, token: str, timeout: float = 30):
        parts = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout
        )
        self.headers = {"Authorization": f"Token {token}"}
        self.json_headers = {**self.headers, "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: dict | None = None) -> LoopAnswer:
        raw = None if body is None else json.dumps(body).encode()
        headers = self.headers if raw is None else self.json_headers
        try:
            self.connection.request(method, path, raw, headers)
            answer = self.connection.getresponse()
            return LoopAnswer(answer.status, answer.read())
        except (http.client.HTTPException, OSError):
            self.connection.close()  # the next request opens a new one
            raise

    def post(self, path: str, json: dict | None = None) -> LoopAnswer:
        return self.request("POST", path, json)

    def get(self, path: str) -> LoopAnswer:
        return self.request("GET", path)

    def __enter__(self) -> LoopClient:
        return self

    def __exit__(self, *exc) -> None:
        self.connection.close()


class HttpxLoopClient(LoopClient):
    """``LoopClient`` on ``httpx.Client``, the load generator before (``--client httpx``),
    to compare what each costs."""

    def __init__(self, base_url: str, token: str, timeout: float = 30):
        self.client = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=timeout
        )

    def request(self, method: str, path: str, body: dict | None = None) -> LoopAnswer:
        answer = self.client.request(method, path, json=body)
        return LoopAnswer(answer.status_code, answer.content)

    def __exit__(self, *exc) -> None:
        self.client.close()


CLIENTS = {"stdlib": LoopClient, "httpx": HttpxLoopClient}


class Annotator(threading.Thread):
    """Claims, votes, claims again (or votes with next), until the deadline or an empty
    queue; latencies are recorded from ``measure_at`` on."""

    def __init__(
        self,
        *,
        base_url: str,
        slug: str,
        token: str,
        start_at: float,
        measure_at: float,
        stop_at: float,
        loop: str,
        client: str = "stdlib",
    ):
        super().__init__(daemon=True)
        self.client = CLIENTS[client](base_url, token)
        self.slug, self.start_at, self.stop_at = slug, start_at, stop_at
        self.measure_at, self.loop = measure_at, loop
        self.claim_ms: list[float] = []
        self.vote_ms: list[float] = []
        self.errors: list[str] = []
        self.ran_dry = False
        self.rng = random.Random(token)

    def _timed(self, into: list[float], path: str, **body) -> LoopAnswer:
        clock = time.monotonic()
        started = time.perf_counter()
        answer = self.client.post(path, **body)
        if self.measure_at <= clock < self.stop_at:
            into.append((time.perf_counter() - started) * 1000)
        return answer

    def _claim(self) -> dict | None:
        claim = self._timed(self.claim_ms, f"/api/v1/projects/{self.slug}/claim/")
        if claim.status_code == 204:
            self.ran_dry = True
            return None
        if claim.status_code != 200:
            self.errors.append(f"claim {claim.status_code}")
            return {}
        return claim.json()

    def run(self) -> None:
        time.sleep(max(0.0, self.start_at - time.monotonic()))
        with self.client:
            assignment = self._claim() if self.loop == "next" else {}
            while assignment is not None and time.monotonic() < self.stop_at:
                if self.loop == "two-calls" or not assignment:
                    assignment = self._claim()
                    if not assignment:
                        continue
                body = {"choice": self.rng.choice(["left", "tie", "right"])}
                body["time_on_task_ms"] = self.rng.randint(2000, 20000)
                if self.loop == "next":
                    body["next"] = True
                vote = self._timed(
                    self.vote_ms, f"/api/v1/assignments/{assignment['id']}/vote/", json=body
                )
                if vote.status_code != 201:
                    self.errors.append(f"vote {vote.status_code}")
                    assignment = {}
                elif self.loop == "next":
                    assignment = vote.json()["next"]
                    self.ran_dry = assignment is None


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its children."""
    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def database_backends_cpu() -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving this database (the server's
    persistent connections; ours left out), by pid, read while they are still open."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        pids = [row[0] for row in cursor.fetchall()]
    found = {}
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        found[pid] = times.user + times.system
    return found


QUEUE_TABLES = ("annotation_pair", "annotation_vote", "annotation_assignment")


def analyze_as_autovacuum_would(cursor) -> None:
    """ANALYZE the queue's tables that have ever held a row, as autovacuum does after a
    bulk write. A table still empty is left unanalysed, as autovacuum leaves
    it: statistics that say "no rows" make the prepared claim plan sequential scans of the
    vote and assignment tables, which it keeps while they grow to thousands of rows (the
    first run on a new database, benchmarks/README.md)."""
    filled = []
    for table in QUEUE_TABLES:
        cursor.execute("SELECT pg_relation_size(%s::regclass) > 0", [table])
        if cursor.fetchone()[0]:
            filled.append(table)
    if filled:
        cursor.execute(f"ANALYZE {', '.join(filled)}")


def warn_without_autovacuum(cursor) -> None:
    """Says so when the server runs without autovacuum: each run then leaves its project's
    deleted rows behind, dead, never analysed again, and runs slow down one after another
    (PostgreSQL's CPU a vote from 2.2 to about 4 ms over eight runs, and a project's delete
    from a second to over a minute, measured here). docs/operations.md, "PostgreSQL's
    statistics": production keeps it on; ``ALTER SYSTEM SET autovacuum = on`` and
    ``SELECT pg_reload_conf()`` for a measurement."""
    cursor.execute("SHOW autovacuum")
    if cursor.fetchone()[0] != "on":
        print(
            "warning: PostgreSQL's autovacuum is off: dead rows of earlier runs pile up and "
            "the figures drift from run to run (docs/operations.md, \"PostgreSQL's "
            'statistics": ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf())'
        )


def delete_project(slug: str) -> None:
    """Removes the benchmark's project; content is protected, so children go first."""
    from django.contrib.auth import get_user_model

    from annotation.models import Pair, Project, Prompt, Response, Vote

    Vote.objects.filter(pair__project__slug=slug).delete()
    Pair.objects.filter(project__slug=slug).delete()
    Prompt.objects.filter(project__slug=slug).delete()
    Response.objects.filter(project__slug=slug).delete()
    Project.objects.filter(slug=slug).delete()
    get_user_model().objects.filter(username__startswith=f"{slug}-ann").delete()


def arguments(description: str = __doc__.split("\n\n")[0]) -> argparse.ArgumentParser:
    """The load's options, which ``pgbouncer_load.py`` shares."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--pairs", type=int, default=10_000, help="queued pairs (enough to last)")
    parser.add_argument("--overlap", type=int, default=3, help="votes each pair gets")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync", help="gunicorn worker class")
    parser.add_argument(
        "--threads", type=int, default=1, help="gunicorn threads a worker (gthread when > 1)"
    )
    parser.add_argument(
        "--loop", choices=["next", "two-calls"], default="next", help="see the docstring"
    )
    parser.add_argument(
        "--client", choices=sorted(CLIENTS), default="stdlib", help="the annotators' HTTP client"
    )
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--url", help="drive this running server instead of starting gunicorn")
    parser.add_argument("--keep", action="store_true", help="keep the project afterwards")
    parser.add_argument(
        "--label-studio",
        action="store_true",
        help="then drive Label Studio the same way (benchmarks/label_studio_load.py)",
    )
    parser.add_argument("--ls-venv", default="/tmp/lsvenv", help="Label Studio's virtualenv")
    return parser


def main() -> None:
    args = arguments().parse_args()

    setup_django()
    slug, tokens = prepare_fixture(args)
    measured = measure(args, slug=slug, tokens=tokens)
    print_measured(args, slug, measured)
    if not args.keep:
        delete_project(slug)
    if args.label_studio:
        compare_label_studio(
            args,
            votes_per_s=measured.votes_per_s,
            p95_ms=max(
                percentile(measured.claims, 0.95) if measured.claims else 0.0,
                percentile(measured.votes, 0.95),
            ),
        )


def prepare_fixture(args) -> tuple[str, list[str]]:
    """A new project of ``args.pairs`` queued pairs and its annotators' tokens, analysed;
    the database migrated first."""
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    slug = f"bench-load-{time.time_ns()}"
    built = time.perf_counter()
    tokens = create_fixture(
        slug=slug, pairs=args.pairs, overlap=args.overlap, annotators=args.annotators
    )
    print(
        f"fixture: {args.pairs} pairs x {args.overlap} votes, {args.annotators} annotators "
        f"({time.perf_counter() - built:.1f} s)"
    )
    with connections["default"].cursor() as cursor:
        # Fresh statistics, as autovacuum gives a table soon after a bulk import; without
        # them the planner guesses one queued pair and sorts instead of walking the index.
        analyze_as_autovacuum_would(cursor)
        warn_without_autovacuum(cursor)
    connections.close_all()  # the server's workers need the connections more than we do
    return slug, tokens


def measure(
    args, *, slug: str, tokens: list[str], extra_env: dict | None = None, others: dict | None = None
) -> Measured:
    """The annotators' loop against gunicorn (started here with ``extra_env``, unless
    ``args.url``); ``others``: processes whose CPU is counted too, by name (PgBouncer)."""
    from django.db import connections

    server = None
    if args.url:
        base_url = args.url.rstrip("/")
    else:
        server = start_server(
            port=args.port,
            workers=args.workers,
            worker_class=args.worker_class,
            threads=args.threads,
            extra_env=extra_env,
        )
        base_url = f"http://127.0.0.1:{args.port}"
    others = others or {}
    cpu = None
    try:
        start_at = time.monotonic() + 0.5
        measure_at = start_at + args.warmup
        stop_at = measure_at + args.duration
        annotators = [
            Annotator(
                base_url=base_url,
                slug=slug,
                token=token,
                start_at=start_at,
                measure_at=measure_at,
                stop_at=stop_at,
                loop=args.loop,
                client=args.client,
            )
            for token in tokens
        ]
        for annotator in annotators:
            annotator.start()
        time.sleep(max(0.0, measure_at - time.monotonic()))
        started_cpu = process_tree_cpu(server.pid) if server else 0.0
        started_database_cpu = database_backends_cpu() if server else {}
        started_others = {name: process_tree_cpu(pid) for name, pid in others.items()}
        client_cpu = time.process_time()
        for annotator in annotators:
            annotator.join()
        elapsed = min(time.monotonic(), stop_at) - measure_at
        client_cpu = time.process_time() - client_cpu
        other_cpu = {
            name: process_tree_cpu(pid) - started_others[name] for name, pid in others.items()
        }
        if server is not None:
            # Per backend: one that began during the run counts from zero.
            database_cpu = sum(
                used - started_database_cpu.get(pid, 0.0)
                for pid, used in database_backends_cpu().items()
            )
            cpu = (process_tree_cpu(server.pid) - started_cpu, database_cpu, client_cpu)
            connections["default"].close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    return Measured(
        elapsed=elapsed,
        claims=[ms for a in annotators for ms in a.claim_ms],
        votes=[ms for a in annotators for ms in a.vote_ms],
        errors=[e for a in annotators for e in a.errors],
        ran_dry=any(a.ran_dry for a in annotators),
        served_by=(
            f"gunicorn, {args.workers} {args.worker_class} workers x {args.threads} threads"
            if server
            else base_url
        ),
        cpu=cpu,
        other_cpu=other_cpu,
    )


def compare_label_studio(args, *, votes_per_s: float, p95_ms: float) -> None:
    """Label Studio under the same load generator, right after (``label_studio_load.py``:
    4 sync workers, as it ships), and the ratios the targets are stated in."""
    import label_studio_load

    try:
        figures = label_studio_load.run_label_studio(
            ls_venv=args.ls_venv,
            annotators=args.annotators,
            duration=args.duration,
            workers=args.workers,
            client=args.client,
        )
    except label_studio_load.LabelStudioUnavailable as missing:
        print(f"Label Studio: {missing}")
        return
    print("--- Label Studio, the same load generator, in the same run")
    label_studio_load.report(figures)
    ratio = votes_per_s / figures["votes_per_s"] if figures["votes_per_s"] else float("inf")
    tenth = min(figures["claim_p95_ms"], figures["vote_p95_ms"]) / 10
    print(f"votes/s against Label Studio's: {ratio:6.1f}x   (target >= 20x)")
    print(
        f"slowest p95 {p95_ms:.1f} ms against a tenth of Label Studio's faster p95, "
        f"{tenth:.1f} ms   (target: under)"
    )


if __name__ == "__main__":
    main()
