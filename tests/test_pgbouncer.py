"""Arbiter behind a real PgBouncer in transaction mode (``ARBITER_DB_POOLER=transaction``,
docs/database.md "Behind PgBouncer"): a gunicorn worker and the command line reach
PostgreSQL through a pool of two server connections, which PgBouncer hands to whichever
client's transaction comes next, reconnects on ``RECONNECT`` and retires after
``server_lifetime``. Token auth, claims and votes, a release build and an agreement report
run without an error; no setting they make outlives its transaction on a server
connection; the project's import lock stays with its holder and goes with a killed one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from annotation.imports import locks
from annotation.models import PairStatus, Release, Role, Vote
from tests import pgbouncer
from tests.factories import MembershipFactory, PairFactory, ProjectFactory, UserFactory
from tests.live_gunicorn import LiveGunicorn

pytestmark = pytest.mark.skipif(
    pgbouncer.skip_reason() is not None, reason=pgbouncer.skip_reason() or ""
)

ROOT = Path(__file__).resolve().parent.parent
POOL_SIZE = 2
POOLED = {"ARBITER_DB_POOLER": "transaction"}
# What a release build and the leaderboard change for their transaction only.
WATCHED_SETTINGS = ("work_mem", "jit", "synchronous_commit")


def _manage(bouncer: pgbouncer.PgBouncer, *args: str, env: dict | None = None):
    """``manage.py`` in a child process, reaching the database through ``bouncer``."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **POOLED, "DATABASE_URL": bouncer.url, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def bouncer():
    # Round robin: a client's consecutive transactions go to different server connections,
    # as they do under load, so a setting made by one statement and reset by a later one
    # would stay behind on the first connection.
    settings = {"server_lifetime": 1, "server_round_robin": 1}
    with pgbouncer.PgBouncer.for_database(
        connection.settings_dict, pool_size=POOL_SIZE, settings=settings
    ) as running:
        yield running


def _settings_of_every_server_connection(bouncer: pgbouncer.PgBouncer) -> dict[int, dict]:
    """Per server connection (its backend pid): each watched setting and its default. As
    many clients as the pool has connections each hold a transaction open at once, so
    together they are handed every one of them."""
    clients = [bouncer.connect() for _ in range(POOL_SIZE)]
    try:
        seen = {}
        for client in clients:
            rows = client.execute(
                "SELECT pg_backend_pid(), name, setting, reset_val FROM pg_settings "
                "WHERE name = ANY(%s)",
                [list(WATCHED_SETTINGS)],
            ).fetchall()
            seen[rows[0][0]] = {name: (setting, default) for _, name, setting, default in rows}
        return seen
    finally:
        for client in clients:
            client.close()


def _annotate(server: LiveGunicorn, token: str, slug: str, *, votes: int, between) -> list:
    """``votes`` votes by one annotator in the one-request loop (vote with ``next``),
    calling ``between(n)`` after the n-th; the answers that were not a success."""
    failures = []
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=30
    ) as api:
        answer = api.post(f"/api/v1/projects/{slug}/claim/")
        assignment = answer.json() if answer.status_code == 200 else None
        for n in range(votes):
            if assignment is None:
                failures.append((answer.status_code, answer.text[:300]))
                break
            answer = api.post(
                f"/api/v1/assignments/{assignment['id']}/vote/",
                json={"choice": "left" if n % 3 else "tie", "next": True},
            )
            assignment = answer.json().get("next") if answer.status_code == 201 else None
            between(n)
    return failures


@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_the_annotators_loop_a_release_and_a_report_through_pgbouncer(bouncer):
    project = ProjectFactory(slug="pooled", overlap=2)
    PairFactory.create_batch(30, project=project, status=PairStatus.QUEUED)
    tokens = []
    for name in ("pooled-a", "pooled-b"):
        user = UserFactory(username=name)
        MembershipFactory(project=project, user=user, role=Role.ANNOTATOR)
        tokens.append(Token.objects.create(user=user).key)

    def reconnecting(n: int) -> None:
        if n == 5:
            bouncer.admin("RECONNECT")  # every server connection replaced after its transaction
        if n in (10, 20):
            time.sleep(1.2)  # past server_lifetime: the idle server connections retire

    env = {**POOLED, "DATABASE_CONN_MAX_AGE": "600"}
    with LiveGunicorn(database_url=bouncer.url, extra_env=env) as server:
        for token in tokens:
            failures = _annotate(server, token, project.slug, votes=25, between=reconnecting)
            assert failures == [], server.log()
        assert "prepared statement" not in server.log()
    # The hot path's statements ran as the functions kept for them in the catalog, planned
    # once per server connection (annotation/core/statement_functions.py).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_proc"
            " WHERE proname ~ '^arbiter_(token_user|take|live_vote)_[0-9a-f]{8}$'"
        )
        assert cursor.fetchone() == (3,)
    assert Vote.objects.filter(pair__project=project).count() == 50
    # From here on server connections live on, so whatever a statement left on one stays.
    bouncer.admin("SET server_lifetime = 3600")

    built = _manage(bouncer, "create_release", project.slug, "--version", "1.0.0")
    assert built.returncode == 0, built.stderr
    release = Release.objects.get(project=project, version="1.0.0")
    assert release.status == Release.Status.BUILT
    assert release.pair_count > 0
    reported = _manage(bouncer, "agreement", project.slug, "--json")
    assert reported.returncode == 0, reported.stderr
    assert json.loads(reported.stdout)["votes"] == 50

    # Nothing the build or the report set stayed on a server connection.
    seen = _settings_of_every_server_connection(bouncer)
    assert len(seen) == POOL_SIZE
    for pid, settings in seen.items():
        for name, (setting, default) in settings.items():
            assert setting == default, f"{name} = {setting} on server connection {pid}"


def _hold_lock_through(bouncer: pgbouncer.PgBouncer, project_id: int) -> subprocess.Popen:
    """A child process holding ``project_id``'s import lock through the pooler, as an
    import's worker does, until it is killed; it says "held" once it has it."""
    code = (
        "import time; from annotation.imports.locks import project_import_lock; "
        "from annotation.models import Project\n"
        f"with project_import_lock(Project.objects.get(pk={project_id})):\n"
        "    print('held', flush=True); time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=ROOT,
        env={**os.environ, **POOLED, "DATABASE_URL": bouncer.url},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


def _lock_free(client: psycopg.Connection, project_id: int) -> bool:
    """Whether a transaction through the pooler could take the lock (given back at once)."""
    key = [locks._LOCK_NAMESPACE, project_id % 2**31]
    with client.transaction():
        return client.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", key).fetchone()[0]


@pytest.mark.timeout(120)
@pytest.mark.django_db(transaction=True)
def test_the_import_lock_stays_with_its_holder_behind_pgbouncer_and_goes_with_a_killed_one(
    bouncer,
):
    project = ProjectFactory(slug="pooled-lock")
    holder = _hold_lock_through(bouncer, project.pk)
    try:
        with bouncer.connect(autocommit=True) as client:
            # Other clients' transactions run on the pool's other server connection, again
            # and again; a session-level lock left on a shared one would be theirs too.
            for _ in range(20):
                assert not _lock_free(client, project.pk)
                client.execute("SELECT count(*) FROM annotation_project").fetchone()
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)
            deadline = time.monotonic() + 10
            while not _lock_free(client, project.pk):
                assert time.monotonic() < deadline, "a killed holder's lock outlived it"
                time.sleep(0.1)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.parametrize(
    ("env", "refusal"),
    [
        (
            {"ARBITER_DB_POOLER": "transaction", "ARBITER_STATEMENT_PLANS": "prepare"},
            "ARBITER_STATEMENT_PLANS=prepare with ARBITER_DB_POOLER=transaction",
        ),
        ({"ARBITER_DB_POOLER": "session"}, "ARBITER_DB_POOLER='session': use one of"),
        ({"ARBITER_PREPARED_STATEMENTS": "false"}, "is now ARBITER_STATEMENT_PLANS: prepare"),
        (
            {
                "ARBITER_DB_POOLER": "transaction",
                "DATABASE_URL": "postgres://arbiter@127.0.0.1:6432/arbiter?pool=true",
            },
            "PgBouncer is the pool",
        ),
    ],
)
def test_a_contradictory_pooler_setting_is_refused_naming_it(env, refusal):
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert refusal in result.stderr


def test_behind_the_pooler_nothing_outlives_a_transaction_on_the_server():
    code = (
        "from config import settings as s; print(s.ARBITER_STATEMENT_PLANS, "
        "s.DATABASES['default']['DISABLE_SERVER_SIDE_CURSORS'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **POOLED},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["functions", "True"]
