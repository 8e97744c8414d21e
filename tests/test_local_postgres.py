"""Arbiter's own PostgreSQL (config/local_postgres.py, docs/database.md): what a checkout
with no DATABASE_URL runs on, the demo's and ``manage.py``'s server, started by the first
connection, and the throwaway server of a test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import psycopg
import pytest

from config.local_postgres import (
    SOCKET_PORT,
    UNPRIVILEGED_USER,
    LocalPostgresError,
    LocalServer,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def folder():
    """A folder the server's user can enter (pytest's tmp_path is its owner's alone)."""
    made = Path(tempfile.mkdtemp(prefix="arbiter-pg-test-"))
    made.chmod(0o755)
    yield made
    for data in made.iterdir():
        if (data / "postmaster.pid").exists():
            LocalServer(data).stop()
    shutil.rmtree(made, ignore_errors=True)


def _connect(server: LocalServer, database: str = "arbiter") -> psycopg.Connection:
    return psycopg.connect(
        host=str(server.socket_dir), port=SOCKET_PORT, user="postgres", dbname=database
    )


def _postmaster(server: LocalServer) -> psutil.Process:
    return psutil.Process(int((server.data_dir / "postmaster.pid").read_text().split()[0]))


def test_a_new_folder_becomes_a_running_server_with_the_database(folder):
    server = LocalServer(folder / "postgres")
    assert not server.running()
    server.start()
    assert server.running()
    with _connect(server) as conn:
        version, encoding = conn.execute(
            "SELECT current_setting('server_version_num')::int, pg_encoding_to_char(encoding) "
            "FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        # the builtin provider's C.UTF-8: code-point order, whatever the system's locales
        assert conn.execute("SELECT 'B' < 'a', 'é' > 'z'").fetchone() == (True, True)
    assert version >= 150000
    assert encoding == "UTF8"
    # Unix socket only, its owner's alone: no TCP port to collide with another server
    assert (server.data_dir / f".s.PGSQL.{SOCKET_PORT}").exists()
    with _connect(server) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SHOW unix_socket_permissions").fetchone() == ("0700",)
        assert conn.execute("SHOW fsync").fetchone() == ("on",)  # the demo's data is kept


@pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL refuses root only when run as root")
def test_under_root_the_server_runs_as_an_unprivileged_user(folder):
    server = LocalServer(folder / "postgres")
    server.start()
    assert _postmaster(server).username() == UNPRIVILEGED_USER
    assert server.data_dir.owner() == UNPRIVILEGED_USER
    assert server.data_dir.stat().st_mode & 0o077 == 0


def test_a_restarted_server_keeps_its_data_and_a_second_start_does_nothing(folder):
    server = LocalServer(folder / "postgres")
    server.start()
    with _connect(server) as conn:
        conn.execute("CREATE TABLE kept (word text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    first = _postmaster(server).pid
    server.start()
    assert _postmaster(server).pid == first
    assert server.stop()
    assert not server.running()
    assert not server.stop()  # nothing to stop
    server.start()
    with _connect(server) as conn:
        assert conn.execute("SELECT word FROM kept").fetchall() == [("still here",)]


def test_callers_that_find_it_down_at_once_start_one_server(folder):
    """Four threads, each with an open file description of its own on the lock folder (flock
    excludes them as it excludes processes), start it at once."""
    server = LocalServer(folder / "postgres")
    errors: list[BaseException] = []

    def start() -> None:
        try:
            LocalServer(folder / "postgres").start()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert server.running()
    postmasters = [
        process
        for process in psutil.process_iter(["cmdline"])
        if str(server.data_dir) in " ".join(process.info["cmdline"] or [])
        and process.parent() is not None
        and str(server.data_dir) not in " ".join(process.parent().cmdline())
    ]
    assert len(postmasters) == 1


def test_a_folder_of_other_files_is_refused_and_left_alone(folder):
    data = folder / "postgres"
    data.mkdir()
    (data / "notes.txt").write_text("mine")
    with pytest.raises(LocalPostgresError, match="holds files but no PostgreSQL data folder"):
        LocalServer(data).start()
    assert (data / "notes.txt").read_text() == "mine"


def test_a_deep_folder_keeps_its_socket_in_a_short_one(folder):
    deep = folder / ("d" * 60) / ("e" * 60) / "postgres"
    deep.parent.mkdir(parents=True)
    deep.parent.chmod(0o755)
    deep.parent.parent.chmod(0o755)
    server = LocalServer(deep)
    assert server.socket_dir != deep
    assert len(str(server.socket_dir / f".s.PGSQL.{SOCKET_PORT}")) < 100
    server.start()
    try:
        with _connect(server) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.remove()
    assert not server.socket_dir.exists()
    assert not deep.exists()


def _without_database_url(var: Path, **extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update({"ARBITER_VAR_DIR": str(var), "ARBITER_ENV": "development", **extra})
    return env


def test_manage_py_with_no_database_url_starts_the_server_under_var(folder):
    """The first connection starts it (config/postgresql/base.py); the next command finds it
    running; ``python -m config.local_postgres stop`` ends it."""
    var = folder / "var"
    env = _without_database_url(var)
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    server = LocalServer(var / "postgres")
    assert server.running()
    created = subprocess.run(
        [sys.executable, "manage.py", "create_project", "local", "--name", "On its own"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stdout + created.stderr
    with _connect(server) as conn:
        assert conn.execute("SELECT name FROM annotation_project").fetchall() == [("On its own",)]
    stopped = subprocess.run(
        [sys.executable, "-m", "config.local_postgres", "stop"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stopped.returncode == 0, stopped.stderr
    assert not server.running()


def _settings_error(env: dict) -> str:
    checked = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode != 0
    return checked.stderr


def test_production_names_its_database(folder):
    env = _without_database_url(
        folder / "var",
        ARBITER_ENV="production",
        DJANGO_SECRET_KEY="x" * 50,
        DJANGO_ALLOWED_HOSTS="arbiter.example.org",
    )
    assert "DATABASE_URL must be set in production" in _settings_error(env)
    assert not (folder / "var" / "postgres").exists()


def test_a_database_url_that_is_not_postgresql_is_refused_with_the_reason(folder):
    env = {**_without_database_url(folder / "var"), "DATABASE_URL": "sqlite:///db.sqlite3"}
    assert "Arbiter runs on PostgreSQL only" in _settings_error(env)
