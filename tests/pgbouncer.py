"""Debian's PgBouncer in a child process on a free loopback port, in transaction mode, in front
of a PostgreSQL server, for tests (and benchmarks) of what only the real pooler shows:

    with PgBouncer.for_database(connection.settings_dict, pool_size=2) as bouncer:
        ... DATABASE_URL=bouncer.url, ARBITER_DB_POOLER=transaction ...
        bouncer.admin("RECONNECT")

It writes its ini and user list into a temporary folder, runs ``pgbouncer`` in the
foreground (as an unprivileged user when this process is root: PgBouncer refuses root, as
PostgreSQL does), waits until it answers, and stops it afterwards. ``skip_reason()`` says why
the tests cannot run when the binary is absent (``.ci/run`` installs it)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg

from config.local_postgres import _run_as
from tests.live_gunicorn import free_port

BINARY_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 10
ADMIN_DATABASE = "pgbouncer"


def binary() -> str | None:
    """The pgbouncer executable: on PATH, else where Debian's package puts it."""
    found = shutil.which("pgbouncer")
    return found or next((path for path in BINARY_PATHS if os.access(path, os.X_OK)), None)


def skip_reason() -> str | None:
    """Why PgBouncer tests cannot run here, or None when they can."""
    if binary() is None:
        return (
            "pgbouncer is not installed (apt-get install pgbouncer; .ci/run installs it): "
            "the tests through PgBouncer need the real pooler"
        )
    return None


class PgBouncer:
    """One PgBouncer in transaction mode, with ``pool_size`` server connections for each
    database and user, in front of PostgreSQL at ``host`` (a name, an address or a socket
    folder) and ``port``. ``settings`` add to or replace the ini's ``[pgbouncer]`` ones
    (``server_lifetime``...). ``url`` is a DATABASE_URL for ``database`` through it."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        database: str,
        user: str,
        password: str = "",
        pool_size: int = 2,
        settings: dict[str, str | int] | None = None,
    ):
        self.database, self.user, self.password = database, user, password
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="arbiter-pgbouncer-"))
        server = f"host={host} port={port}" + (f" password={password}" if password else "")
        ini = {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": self.folder / "userlist.txt",
            "admin_users": user,
            "pool_mode": "transaction",
            "default_pool_size": pool_size,
            "reserve_pool_size": 0,
            "max_client_conn": 500,
            # psycopg and Django send these; PgBouncer refuses unknown startup parameters.
            "ignore_startup_parameters": "extra_float_digits,options",
            "logfile": self.folder / "pgbouncer.log",
            "pidfile": self.folder / "pgbouncer.pid",
            **(settings or {}),
        }
        lines = ["[databases]", f"* = {server}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in ini.items()]
        (self.folder / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        (self.folder / "userlist.txt").write_text(f'"{user}" "{password}"\n')
        self.process: subprocess.Popen | None = None

    @classmethod
    def for_database(cls, settings_dict: dict, **options) -> PgBouncer:
        """In front of the server and database of a Django connection's ``settings_dict``."""
        return cls(
            host=settings_dict.get("HOST") or "127.0.0.1",
            port=int(settings_dict.get("PORT") or 5432),
            database=settings_dict["NAME"],
            user=settings_dict.get("USER") or "postgres",
            password=settings_dict.get("PASSWORD") or "",
            **options,
        )

    @property
    def url(self) -> str:
        password = f":{quote(self.password, safe='')}" if self.password else ""
        return f"postgres://{self.user}{password}@127.0.0.1:{self.port}/{self.database}"

    def connect(self, **options) -> psycopg.Connection:
        """A client connection through the pooler to the database."""
        return psycopg.connect(self._dsn(self.database), **options)

    def _dsn(self, database: str) -> str:
        password = f" password={self.password}" if self.password else ""
        return f"host=127.0.0.1 port={self.port} dbname={database} user={self.user}{password}"

    def admin(self, command: str) -> list[tuple]:
        """A command on PgBouncer's admin console (``RECONNECT``, ``SHOW SERVERS``), sent by
        the simple query protocol, which the console alone speaks; its rows, if any."""
        with psycopg.connect(
            self._dsn(ADMIN_DATABASE), autocommit=True, cursor_factory=psycopg.ClientCursor
        ) as console:
            cursor = console.execute(command)
            return cursor.fetchall() if cursor.description else []

    def start(self) -> PgBouncer:
        account = _run_as()
        if account is not None:
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
        self.folder.chmod(0o700)
        executable = binary()
        if executable is None:
            raise RuntimeError(skip_reason())
        self.process = subprocess.Popen(
            [executable, str(self.folder / "pgbouncer.ini")],
            cwd=self.folder,
            user=account.pw_uid if account else None,
            group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_until_serving()
        return self

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited during start-up:\n{self.log()}")
            try:
                self.admin("SHOW VERSION")
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        log = self.log()
        self.stop()
        raise RuntimeError(f"pgbouncer did not answer within {START_TIMEOUT_S} s:\n{log}")

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stops PgBouncer (its server connections close with it) and removes its folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
