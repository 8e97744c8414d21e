"""gunicorn in a child process on a free loopback port, with the production settings (DEBUG
off, persistent database connections), for tests of what only a real server shows.

    with LiveGunicorn(database_url=..., extra_env={...}) as server:
        httpx.get(f"{server.url}/healthz")
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60


# Production settings: the test server's secret and host.
_PRODUCTION_ENV = {
    "ARBITER_ENV": "production",
    "DJANGO_SECRET_KEY": "live-gunicorn-test-only-" + "k" * 40,
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
}


@functools.cache
def collected_static() -> Path:
    """The static files as ``collectstatic`` leaves them in production (hashed names and their
    manifest, which every page's ``{% static %}`` reads, error pages included), made once per
    test process in a folder of its own."""
    folder = Path(tempfile.mkdtemp(prefix="arbiter-static-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(_PRODUCTION_ENV, DJANGO_STATIC_ROOT=str(folder))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LiveGunicorn:
    """``deploy/commands.sh web``, as production runs it, with ``workers`` sync workers (one
    unless told); ``log()`` returns their output."""

    def __init__(self, *, database_url: str, extra_env: dict | None = None, workers: int = 1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
        env.update(
            _PRODUCTION_ENV,
            DJANGO_SECURE_SSL_REDIRECT="false",
            DJANGO_STATIC_ROOT=str(collected_static()),
            DATABASE_URL=database_url,
            ARBITER_LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env or {})
        # The production command line (deploy/commands.sh, docs/deploy.md), this
        # interpreter's gunicorn first on the PATH.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["WEB_CONCURRENCY"] = str(workers)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        command = [str(ROOT / "deploy" / "commands.sh"), "web", f"127.0.0.1:{self.port}"]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def __enter__(self) -> LiveGunicorn:
        self.wait_until_serving()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def wait_until_serving(self) -> None:
        """Until the worker answers a request (the port is bound before the worker boots)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited during start-up:\n{self.log()}")
            try:
                httpx.get(f"{self.url}/healthz", timeout=5)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        output = self.log()
        self.stop()
        raise RuntimeError(f"gunicorn did not answer within {START_TIMEOUT_S} s:\n{output}")

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
