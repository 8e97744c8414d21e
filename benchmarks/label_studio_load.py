"""Label Studio under the annotator loop (issue 19): the reference the annotator benchmark's
votes/s and latencies are compared with, measured by the same load generator. N annotators
each loop next-task-then-annotate over Label Studio's REST API against gunicorn and
PostgreSQL, as its labeling stream does; prints votes/s, next and annotation latency
(p50/p95), CPU per vote and what the database says afterwards, in annotator_load.py's format.

    python3.11 -m venv /tmp/lsvenv && /tmp/lsvenv/bin/pip install label-studio gunicorn
    createdb -h 127.0.0.1 -U postgres ls_bench
    .venv/bin/python benchmarks/label_studio_load.py                 # the issue's sizes
    ... benchmarks/label_studio_load.py --duration 10 --tasks 1000  # a quick look

Label Studio lives in its own virtualenv (``--ls-venv``), never in this project's
dependencies; without it the script says so and exits 0 (it is a benchmark, not a test).
``run_label_studio()`` is the same run as a function, for annotator_load.py to measure both
servers in one sitting.

The script migrates Label Studio's database (``--ls-database-url``, default
``postgres://postgres@127.0.0.1:5432/ls_bench``), creates its organization (legacy API tokens
enabled: ``Authorization: Token ...``, as this project's API takes), an admin and the
annotators with their tokens in Label Studio's own Python, then starts Label Studio as
production runs it, with its shipped settings:

    DJANGO_SETTINGS_MODULE=label_studio.core.settings.label_studio DEBUG=false \\
    LOG_LEVEL=WARNING DJANGO_DB=default POSTGRE_NAME=ls_bench ... PYTHONPATH=<label_studio> \\
    /tmp/lsvenv/bin/python -m gunicorn label_studio.core.wsgi:application --workers 4 \\
        --bind 127.0.0.1:8766 --log-level warning

(Sentry and the start-up PyPI version check off: no reporting from a benchmark.) Through the
API it creates a project (``maximum_annotations`` = the overlap, a three-way choice on a
prompt and two answers) and imports the tasks, the same texts as annotator_load.py's pairs.
Each annotator then loops ``GET /api/projects/<id>/next`` (the next task, locked for that
annotator) and ``POST /api/tasks/<id>/annotations/`` with a choice. The project is deleted
afterwards unless ``--keep``.

Label Studio opens a database connection per request (it sets no ``CONN_MAX_AGE``), so its
backends end with their requests; their CPU is read from the PostgreSQL postmaster's reaped
children, which also counts other databases' ended backends on a shared server.
``--persistent-connections`` runs it with ``CONN_MAX_AGE`` = 600 instead (not as shipped), to
see what the connection per request costs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import annotator_load as load  # the same percentile and CPU accounting as the Arbiter side

DEFAULT_VENV = Path("/tmp/lsvenv")
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/ls_bench"
CHOICES = ("left", "tie", "right")
LABEL_CONFIG = """<View>
  <Text name="prompt" value="$prompt"/>
  <Text name="answer_a" value="$answer_a"/>
  <Text name="answer_b" value="$answer_b"/>
  <Choices name="choice" toName="prompt" choice="single" required="true">
    <Choice value="left"/>
    <Choice value="tie"/>
    <Choice value="right"/>
  </Choices>
</View>"""

# Runs in Label Studio's Python (its virtualenv, its Django): migrations, the organization
# with legacy tokens on, an admin and the annotators (reused across runs: each run has its
# own project). Prints one JSON line: the version and the tokens.
SETUP = r"""
import json, os, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
import label_studio
from organizations.models import Organization
from rest_framework.authtoken.models import Token
from users.models import User

annotators = int(sys.argv[1])

def user(email, **extra):
    found = User.objects.filter(email=email).first()
    if found is None:
        found = User.objects.create_user(email=email, password=None, **extra)
    return found

admin = user("bench-admin@localhost", is_staff=True, is_superuser=True)
org = Organization.objects.first()
if org is None:
    org = Organization.create_organization(
        created_by=admin, title="Label Studio", legacy_api_tokens_enabled=True
    )
if not org.jwt.legacy_api_tokens_enabled:
    org.jwt.legacy_api_tokens_enabled = True
    org.jwt.save()
tokens = []
for member in [admin] + [user(f"bench-ann{n}@localhost") for n in range(annotators)]:
    org.add_user(member)
    if member.active_organization_id != org.id:
        member.active_organization = org
        member.save(update_fields=["active_organization"])
    tokens.append(Token.objects.get_or_create(user=member)[0].key)
print(json.dumps({"version": label_studio.__version__, "admin": tokens[0], "tokens": tokens[1:]}))
"""

# gunicorn's configuration for --persistent-connections: Label Studio's settings module reads
# django.conf.settings while it loads, so it cannot be wrapped; each worker sets the database's
# CONN_MAX_AGE once the application is loaded (Django reads it at each connect).
PERSISTENT_GUNICORN_CONFIG = """
def post_worker_init(worker):
    from django.conf import settings
    from django.db import connections

    settings.DATABASES["default"]["CONN_MAX_AGE"] = 600
    connections["default"].close()
"""


class LabelStudioUnavailable(RuntimeError):
    """No Label Studio virtualenv to run: the comparison is skipped, not failed."""


def label_studio_package(venv: Path) -> Path:
    """The installed ``label_studio`` package folder (its apps import as top-level modules,
    so it goes on the path as ``label-studio start`` puts it)."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise LabelStudioUnavailable(
            f"No Label Studio virtualenv at {venv}: create it with "
            f"`python3.11 -m venv {venv} && {venv}/bin/pip install label-studio gunicorn` "
            "(or pass --ls-venv); skipping the Label Studio comparison."
        )
    found = sorted(venv.glob("lib/python3*/site-packages/label_studio/core/wsgi.py"))
    if not found:
        raise LabelStudioUnavailable(
            f"{venv} has no label-studio installed: run `{venv}/bin/pip install label-studio "
            "gunicorn`; skipping the Label Studio comparison."
        )
    return found[0].parent.parent


def ls_environment(*, package: Path, database_url: str, data_dir: str) -> dict[str, str]:
    """Label Studio's production settings on PostgreSQL, from a ``postgres://`` URL."""
    url = urlsplit(database_url)
    if url.scheme not in ("postgres", "postgresql") or not url.path.strip("/"):
        raise SystemExit(f"--ls-database-url must be postgres://user@host:port/db, not {url}")
    env = {
        key: value
        for key, value in os.environ.items()
        # This project's settings must not leak into Label Studio's Django.
        if not key.startswith(("DJANGO_", "DATABASE_", "ARBITER_", "PYTHON"))
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "label_studio.core.settings.label_studio",
            "PYTHONPATH": str(package),
            "DJANGO_DB": "default",
            "POSTGRE_NAME": unquote(url.path.strip("/")),
            "POSTGRE_USER": unquote(url.username or "postgres"),
            "POSTGRE_PASSWORD": unquote(url.password or ""),
            "POSTGRE_HOST": url.hostname or "127.0.0.1",
            "POSTGRE_PORT": str(url.port or 5432),
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "LABEL_STUDIO_BASE_DATA_DIR": data_dir,
            "SECRET_KEY": os.environ.get("LS_SECRET_KEY", "label-studio-benchmark-" + "x" * 40),
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "LATEST_VERSION_CHECK": "false",
            "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        }
    )
    return env


def setup_label_studio(*, venv: Path, env: dict[str, str], annotators: int) -> dict:
    """Migrations, organization, users and tokens, in Label Studio's own Python."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", SETUP, str(annotators)],
        env=env,
        cwd=env["LABEL_STUDIO_BASE_DATA_DIR"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"Label Studio's setup failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_label_studio(
    *,
    venv: Path,
    env: dict[str, str],
    port: int,
    workers: int,
    worker_class: str,
    persistent_connections: bool,
) -> subprocess.Popen:
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "gunicorn",
        "label_studio.core.wsgi:application",
        "--workers",
        str(workers),
        "--worker-class",
        worker_class,
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
    ]
    data_dir = env["LABEL_STUDIO_BASE_DATA_DIR"]
    if persistent_connections:
        config = Path(data_dir, "gunicorn_persistent.py")
        config.write_text(PERSISTENT_GUNICORN_CONFIG)
        command += ["--config", str(config)]
    try:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    except httpx.TransportError:
        pass
    else:
        raise SystemExit(f"Something already answers on port {port}: pass another --port")
    # Label Studio prints its settings on each worker's start: its log goes to a file, and
    # the run reports the errors it logged.
    with open(Path(data_dir, "gunicorn.log"), "w") as log:
        server = subprocess.Popen(
            command, cwd=data_dir, env=env, stdout=subprocess.DEVNULL, stderr=log
        )
    deadline = time.monotonic() + 180  # four workers importing Label Studio on busy cores
    while time.monotonic() < deadline:
        if server.poll() is not None:
            logged = Path(data_dir, "gunicorn.log").read_text()[-3000:]
            raise SystemExit(f"Label Studio's gunicorn exited during start-up:\n{logged}")
        # Only our gunicorn's answer counts: on a shared machine another server may take
        # the port between the check above and the bind (gunicorn then retries).
        if listens(server.pid, port):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
        time.sleep(0.5)
    stop(server)
    raise SystemExit("Label Studio's gunicorn did not answer within 180 s")


def listens(pid: int, port: int) -> bool:
    """Whether the process ``pid`` (gunicorn's arbiter) holds the listening socket on ``port``."""
    try:
        return any(
            c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
            for c in psutil.Process(pid).net_connections(kind="tcp")
        )
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def task_rows(tasks: int) -> list[dict]:
    """annotator_load.create_fixture's texts, one task a pair."""
    rows = []
    for i in range(tasks):
        sides = [
            f"{model} answers question {i} at some length. " * 4
            for model in (f"model-{i % 5}", f"model-{(i + 2) % 5}")
        ]
        rows.append(
            {
                "prompt": f"Question {i}: which answer explains it better?",
                "answer_a": sides[0],
                "answer_b": sides[1],
            }
        )
    return rows


def create_project(
    *,
    base_url: str,
    admin_token: str,
    title: str,
    tasks: int,
    overlap: int,
    import_batch: int | None = None,
) -> int:
    """The project and its tasks through Label Studio's API, as a user would import them: in
    one request, or ``import_batch`` tasks a request (one request of 100,000 outlasts its
    gunicorn's 30 s timeout and is answered 500)."""
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Token {admin_token}"}, timeout=600
    ) as client:
        made = client.post(
            "/api/projects/",
            json={"title": title, "label_config": LABEL_CONFIG, "maximum_annotations": overlap},
        )
        if made.status_code != 201:
            raise SystemExit(f"Label Studio refused the project: {made.status_code} {made.text}")
        project = made.json()["id"]
        rows = task_rows(tasks)
        step = import_batch or len(rows) or 1
        for start in range(0, len(rows), step):
            imported = client.post(
                f"/api/projects/{project}/import", json=rows[start : start + step]
            )
            if imported.status_code != 201:
                raise SystemExit(f"Label Studio refused the import: {imported.status_code}")
    return project


def delete_project(*, base_url: str, admin_token: str, project: int) -> None:
    httpx.delete(
        f"{base_url}/api/projects/{project}/",
        headers={"Authorization": f"Token {admin_token}"},
        timeout=600,
    )


class Annotator(threading.Thread):
    """Asks for the next task, annotates it, asks again, until the deadline or no task is
    left: annotator_load.Annotator's loop on Label Studio's API."""

    def __init__(
        self,
        *,
        base_url: str,
        project: int,
        token: str,
        start_at: float,
        stop_at: float,
        client: str = "stdlib",
    ):
        super().__init__(daemon=True)
        self.client = load.CLIENTS[client](base_url, token)  # annotator_load.py's clients
        self.project, self.start_at, self.stop_at = project, start_at, stop_at
        self.claim_ms: list[float] = []
        self.vote_ms: list[float] = []
        self.errors: list[str] = []
        self.ran_dry = False
        self.rng = random.Random(token)

    def run(self) -> None:
        time.sleep(max(0.0, self.start_at - time.monotonic()))
        with self.client:
            while time.monotonic() < self.stop_at:
                started = time.perf_counter()
                claim = self.client.get(f"/api/projects/{self.project}/next")
                self.claim_ms.append((time.perf_counter() - started) * 1000)
                if claim.status_code == 404:
                    self.ran_dry = True
                    return
                if claim.status_code != 200:
                    self.errors.append(f"next {claim.status_code}")
                    continue
                task = claim.json()
                choice = self.rng.choice(CHOICES)
                result = {
                    "from_name": "choice",
                    "to_name": "prompt",
                    "type": "choices",
                    "value": {"choices": [choice]},
                }
                started = time.perf_counter()
                vote = self.client.post(
                    f"/api/tasks/{task['id']}/annotations/?project={self.project}",
                    json={"result": [result], "lead_time": self.rng.randint(2000, 20000) / 1000},
                )
                self.vote_ms.append((time.perf_counter() - started) * 1000)
                if vote.status_code != 201:
                    self.errors.append(f"annotation {vote.status_code}")


class PostgresCpu:
    """CPU seconds PostgreSQL spends for one database, on a server on this machine: the
    backends open on it (exact, as annotator_load.py reads them) and, apart, every backend
    that ended, of any database (the postmaster's reaped children), with the postmaster's
    own forking: where each request has its own connection, that is where its CPU goes.
    ``None`` where psutil cannot see the server's processes."""

    def __init__(self, database_url: str):
        import psycopg

        self.connection = psycopg.connect(database_url, autocommit=True)
        (backend,) = self.connection.execute("SELECT pg_backend_pid()").fetchall()[0]
        try:
            self.postmaster: psutil.Process | None = psutil.Process(backend).parent()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self.postmaster = None

    def read(self) -> tuple[dict[int, float], float] | None:
        """CPU seconds of each open backend of this database, and of the ended ones with the
        postmaster."""
        if self.postmaster is None:
            return None
        pids = [
            row[0]
            for row in self.connection.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchall()
        ]
        try:
            times = self.postmaster.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        ended = times.user + times.system + times.children_user + times.children_system
        live = {}
        for pid in pids:
            try:
                backend = psutil.Process(pid).cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            live[pid] = backend.user + backend.system
        return live, ended

    def close(self) -> None:
        self.connection.close()


def audit(database_url: str, project: int) -> dict:
    """What Label Studio's database says after the run, the annotator benchmark's checks."""
    import psycopg

    with psycopg.connect(database_url) as connection:
        counted = (
            "SELECT t.id, t.overlap, t.total_annotations, count(a.id) AS n FROM task t "
            "LEFT JOIN task_completion a ON a.task_id = t.id AND NOT a.was_cancelled "
            "WHERE t.project_id = %(p)s GROUP BY t.id"
        )

        def one(sql: str) -> int:
            (value,) = connection.execute(sql, {"p": project}).fetchall()[0]
            return value

        return {
            "votes": one(
                "SELECT count(*) FROM task_completion WHERE project_id = %(p)s "
                "AND NOT was_cancelled"
            ),
            "pairs_over_target": one(f"SELECT count(*) FROM ({counted}) c WHERE n > overlap"),
            "pairs_complete": one(f"SELECT count(*) FROM ({counted}) c WHERE n = overlap"),
            "counter_mismatches": one(
                f"SELECT count(*) FROM ({counted}) c WHERE n <> total_annotations"
            ),
            "duplicate_votes": one(
                "SELECT count(*) FROM (SELECT task_id, completed_by_id FROM task_completion "
                "WHERE project_id = %(p)s AND NOT was_cancelled "
                "GROUP BY task_id, completed_by_id HAVING count(*) > 1) d"
            ),
            "live_leases": one(
                "SELECT count(*) FROM tasks_tasklock l JOIN task t ON t.id = l.task_id "
                "WHERE t.project_id = %(p)s AND l.expire_at > now()"
            ),
        }


def run_label_studio(
    *,
    ls_venv: Path | str = DEFAULT_VENV,
    database_url: str = DEFAULT_DATABASE_URL,
    annotators: int = 8,
    duration: float = 30.0,
    tasks: int = 3000,
    overlap: int = 3,
    workers: int = 4,
    worker_class: str = "sync",
    port: int = 8766,
    persistent_connections: bool = False,
    keep: bool = False,
    import_batch: int | None = None,
    client: str = "stdlib",
) -> dict:
    """One Label Studio run: sets it up, loads it for ``duration`` seconds, stops it; returns
    the figures (latencies in ms, CPU in ms per vote; ``None`` where not measurable).
    Raises LabelStudioUnavailable without a Label Studio virtualenv."""
    venv = Path(ls_venv)
    package = label_studio_package(venv)
    with tempfile.TemporaryDirectory(prefix="ls-bench-") as data_dir:
        env = ls_environment(package=package, database_url=database_url, data_dir=data_dir)
        built = time.perf_counter()
        setup = setup_label_studio(venv=venv, env=env, annotators=annotators)
        setup_s = time.perf_counter() - built
        server = start_label_studio(
            venv=venv,
            env=env,
            port=port,
            workers=workers,
            worker_class=worker_class,
            persistent_connections=persistent_connections,
        )
        base_url = f"http://127.0.0.1:{port}"
        try:
            built = time.perf_counter()
            project = create_project(
                base_url=base_url,
                admin_token=setup["admin"],
                title=f"bench-load-{int(time.time())}",
                tasks=tasks,
                overlap=overlap,
                import_batch=import_batch,
            )
            import_s = time.perf_counter() - built
            database = PostgresCpu(database_url)
            try:
                started_db = database.read()
                started_cpu = load.process_tree_cpu(server.pid)
                client_cpu = time.process_time()
                start_at = time.monotonic() + 0.5
                stop_at = start_at + duration
                threads = [
                    Annotator(
                        base_url=base_url,
                        project=project,
                        token=token,
                        start_at=start_at,
                        stop_at=stop_at,
                        client=client,
                    )
                    for token in setup["tokens"]
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                elapsed = min(time.monotonic(), stop_at) - start_at
                client_cpu = time.process_time() - client_cpu
                server_cpu = load.process_tree_cpu(server.pid) - started_cpu
                ended_db = database.read()
            finally:
                database.close()
            open_cpu = ended_cpu = None
            if started_db is not None and ended_db is not None:
                # A backend open at both ends (the import's, with persistent connections)
                # counts for what it did in between.
                open_cpu = sum(
                    cpu - started_db[0].get(pid, 0.0) for pid, cpu in ended_db[0].items()
                )
                ended_cpu = ended_db[1] - started_db[1]
            found = audit(database_url, project)
            if not keep:
                delete_project(base_url=base_url, admin_token=setup["admin"], project=project)
        finally:
            stop(server)
        logged = [
            line
            for line in Path(data_dir, "gunicorn.log").read_text(errors="replace").splitlines()
            if "[ERROR]" in line or "[CRITICAL]" in line
        ]

    claims = [ms for t in threads for ms in t.claim_ms]
    votes = [ms for t in threads for ms in t.vote_ms]
    errors = [e for t in threads for e in t.errors]
    count = len(votes) or 1
    per_vote = {
        "gunicorn": server_cpu / count * 1000,
        "postgres": (
            (open_cpu + (0.0 if persistent_connections else ended_cpu)) / count * 1000
            if open_cpu is not None and ended_cpu is not None
            else None
        ),
        "client": client_cpu / count * 1000,
    }
    known = [v for v in per_vote.values() if v is not None]
    return {
        "server": f"Label Studio {setup['version']}",
        "version": setup["version"],
        "workers": workers,
        "worker_class": worker_class,
        "persistent_connections": persistent_connections,
        "annotators": annotators,
        "tasks": tasks,
        "overlap": overlap,
        "setup_s": setup_s,
        "import_s": import_s,
        "elapsed_s": elapsed,
        "ran_dry": any(t.ran_dry for t in threads),
        "votes_per_s": len(votes) / elapsed,
        "claims": len(claims),
        "votes": len(votes),
        "claim_p50_ms": load.percentile(claims, 0.5),
        "claim_p95_ms": load.percentile(claims, 0.95),
        "vote_p50_ms": load.percentile(votes, 0.5),
        "vote_p95_ms": load.percentile(votes, 0.95),
        "mean_claim_vote_ms": (
            statistics.fmean(claims) + statistics.fmean(votes) if votes else float("nan")
        ),
        "cpu_per_vote_ms": sum(known) if votes else None,
        "gunicorn_cpu_per_vote_ms": per_vote["gunicorn"],
        "postgres_cpu_per_vote_ms": per_vote["postgres"],
        "client_cpu_per_vote_ms": per_vote["client"],
        # Ended backends of any database and the postmaster's forking: Label Studio's as
        # shipped (in its PostgreSQL figure), someone else's with persistent connections.
        "postgres_ended_cpu_per_vote_ms": (
            ended_cpu / count * 1000 if ended_cpu is not None else None
        ),
        "errors": errors,
        "logged_errors": logged,
        "audit": found,
    }


def report(figures: dict) -> None:
    """annotator_load.py's lines for a Label Studio run (claim = next task, vote = annotation)."""
    connections = "persistent connections" if figures["persistent_connections"] else "as shipped"
    dry = " (the queue ran dry)" if figures["ran_dry"] else ""
    print(
        f"server: {figures['server']} ({connections}), gunicorn, {figures['workers']} "
        f"{figures['worker_class']} workers; {figures['annotators']} annotators for "
        f"{figures['elapsed_s']:.1f} s{dry}"
    )
    print(
        f"fixture:            {figures['tasks']} tasks x {figures['overlap']} annotations, "
        f"imported in {figures['import_s']:.1f} s "
        f"({figures['tasks'] / figures['import_s']:,.0f} tasks/s)"
    )
    print(f"votes/s:            {figures['votes_per_s']:8.1f}")
    print(f"nexts:              {figures['claims']:8d}")
    print(f"votes:              {figures['votes']:8d}")
    print(f"next  p50 / p95 ms: {figures['claim_p50_ms']:8.1f} / {figures['claim_p95_ms']:.1f}")
    print(f"vote  p50 / p95 ms: {figures['vote_p50_ms']:8.1f} / {figures['vote_p95_ms']:.1f}")
    print(f"mean next+vote ms:  {figures['mean_claim_vote_ms']:8.1f}")
    if figures["cpu_per_vote_ms"] is not None:
        postgres = figures["postgres_cpu_per_vote_ms"]
        postgres_text = f"{postgres:.1f}" if postgres is not None else "not measured"
        ended = figures["postgres_ended_cpu_per_vote_ms"]
        if ended is not None:
            postgres_text += (
                f" of which ended backends, any database's, {ended:.1f}"
                if not figures["persistent_connections"]
                else f"; ended backends, any database's, not counted: {ended:.1f}"
            )
        print(
            f"CPU per vote ms:    {figures['cpu_per_vote_ms']:8.1f} (gunicorn "
            f"{figures['gunicorn_cpu_per_vote_ms']:.1f}, PostgreSQL {postgres_text}, "
            f"load generator {figures['client_cpu_per_vote_ms']:.1f})"
        )
        cores = psutil.cpu_count() or 1
        print(
            f"idle-CPU capacity:  {cores * 1000 / figures['cpu_per_vote_ms']:8.1f} votes/s "
            f"on {cores} cores"
        )
    errors = figures["errors"]
    print(f"http errors:        {len(errors):8d} {sorted(set(errors))[:5] or ''}")
    found = figures["audit"]
    print(f"votes in database:  {found['votes']:8d}")
    print(f"tasks complete:     {found['pairs_complete']:8d}")
    print(f"tasks over target:  {found['pairs_over_target']:8d}")
    print(f"duplicate votes:    {found['duplicate_votes']:8d}")
    print(f"counter mismatches: {found['counter_mismatches']:8d}")
    print(f"locks still live:   {found['live_leases']:8d}")
    logged = figures["logged_errors"]
    print(f"errors it logged:   {len(logged):8d} {logged[0][:160] if logged else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ls-venv", type=Path, default=DEFAULT_VENV, help="Label Studio's venv")
    parser.add_argument(
        "--ls-database-url",
        default=os.environ.get("LS_DATABASE_URL", DEFAULT_DATABASE_URL),
        help="Label Studio's PostgreSQL database (its own, not this project's)",
    )
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--tasks", type=int, default=3000, help="imported tasks (enough to last)")
    parser.add_argument(
        "--import-batch", type=int, help="tasks a request of the import (default: all in one)"
    )
    parser.add_argument("--overlap", type=int, default=3, help="annotations each task gets")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync", help="gunicorn worker class")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument(
        "--client", choices=sorted(load.CLIENTS), default="stdlib", help="the annotators' client"
    )
    parser.add_argument(
        "--persistent-connections",
        action="store_true",
        help="CONN_MAX_AGE=600 (Label Studio ships a connection per request)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the project afterwards")
    args = parser.parse_args()
    try:
        figures = run_label_studio(
            ls_venv=args.ls_venv,
            database_url=args.ls_database_url,
            annotators=args.annotators,
            duration=args.duration,
            tasks=args.tasks,
            overlap=args.overlap,
            workers=args.workers,
            worker_class=args.worker_class,
            port=args.port,
            persistent_connections=args.persistent_connections,
            keep=args.keep,
            import_batch=args.import_batch,
            client=args.client,
        )
    except LabelStudioUnavailable as missing:
        print(missing)
        return
    report(figures)


if __name__ == "__main__":
    main()
