"""A real Celery worker in a child process, on the test database and the Redis broker.

Tests that use it need ``transactional_db`` (the worker sees only committed rows) and
CELERY_BROKER_URL pointing at Redis.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from config.queues import ALL_QUEUES

ROOT = Path(__file__).resolve().parent.parent


def database_url_for_tests() -> str:
    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    # A socket folder (the session's own server, config/local_postgres.py) is escaped.
    host = quote(db.get("HOST") or "127.0.0.1", safe="")
    port = db.get("PORT") or 5432
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


class WorkerProcess:
    def __init__(
        self,
        queues: str = ALL_QUEUES,
        concurrency: int = 2,
        extra_env: dict | None = None,
        beat: bool = False,
    ):
        env = {
            **os.environ,
            "ARBITER_ENV": "test",
            "DATABASE_URL": database_url_for_tests(),
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "ARBITER_MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "ARBITER_RELEASE_ROOT": str(settings.ARBITER_RELEASE_ROOT),
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        self.log_path = Path(settings.MEDIA_ROOT).parent / f"worker-{time.monotonic_ns()}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        # -B: this worker also runs Celery beat (CELERY_BEAT_SCHEDULE), as `make demo` does.
        beat_args = ["-B", "-s", str(self.log_path.with_suffix(".beat"))] if beat else []
        # The production command line (deploy/commands.sh, docs/deploy.md), this
        # interpreter's celery first on the PATH, with options that make a test's start quick.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        self.process = subprocess.Popen(
            [
                str(ROOT / "deploy" / "commands.sh"),
                "worker",
                queues,
                str(concurrency),
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"test-{time.monotonic_ns()}@%h",
                *beat_args,
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children), as a crash would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def log(self) -> str:
        return self.log_path.read_text()


def purge_broker() -> None:
    from config.celery import app

    app.control.purge()


def time_limits_env(seconds: int) -> dict[str, str]:
    """Every kind's time limit (``ARBITER_TASK_TIME_LIMITS`` names their settings) set to
    ``seconds``, for a worker started with a short visibility timeout: a kind added later
    is shortened too, never left above the timeout (which the settings refuse)."""
    return {name: str(seconds) for _limit, name in settings.ARBITER_TASK_TIME_LIMITS.values()}
