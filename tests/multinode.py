"""A deployment of several machines on loopback, for tests/test_multinode.py: two gunicorn web
nodes and two Celery workers, each started by its ``deploy/commands.sh`` line (as
deploy/compose.yaml runs it) with a local folder of its own for media, releases, checkpoints,
temporary files and metrics, all of them on the bucket (``ARBITER_STORAGE=s3``, moto's
server) and on PostgreSQL through PgBouncer in transaction mode
(``ARBITER_DB_POOLER=transaction``), with a pool smaller than their connections."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.celery_worker import time_limits_env
from tests.live_gunicorn import _PRODUCTION_ENV, LiveGunicorn
from tests.s3_server import CREDENTIALS, S3Storage

# The folders a node writes to; with the bucket, nothing may stay in them but metrics.
WORK_FOLDERS = {
    "ARBITER_MEDIA_ROOT": "media",
    "ARBITER_RELEASE_ROOT": "releases",
    "ARBITER_CHECKPOINT_ROOT": "checkpoints",
    "ARBITER_VAR_DIR": "var",
    "TMPDIR": "tmp",
}
METRICS_FOLDER = "metrics"
# A killed worker's job is handed out again once the broker's visibility timeout has passed;
# every time limit, with the time to kill past it, stays below it (config/settings.py).
VISIBILITY_S = 30
TIME_LIMIT_S = 24
KILL_AFTER_S = 4


def shared_env(*, database_url: str, bucket: S3Storage) -> dict[str, str]:
    """What every node and worker reads alike: production settings, the pooler, the broker
    and the bucket, short job limits, and every upload a job for the workers."""
    return {
        **_PRODUCTION_ENV,
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DATABASE_URL": database_url,
        "DATABASE_CONN_MAX_AGE": "600",
        "ARBITER_DB_POOLER": "transaction",
        "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"],
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CELERY_VISIBILITY_S": str(VISIBILITY_S),
        "ARBITER_TASK_KILL_AFTER_S": str(KILL_AFTER_S),
        **time_limits_env(TIME_LIMIT_S),
        "ARBITER_SYNC_IMPORT_MAX_BYTES": "1",
        "ARBITER_STORAGE": "s3",
        "ARBITER_S3_BUCKET": bucket.bucket,
        "ARBITER_S3_ENDPOINT_URL": bucket.server.url,
        "ARBITER_S3_PREFIX": bucket.prefix,
        **CREDENTIALS,
        "ARBITER_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }


def node_env(root: Path) -> dict[str, str]:
    """A node's own empty local folders under ``root``."""
    env = {name: str(root / folder) for name, folder in WORK_FOLDERS.items()}
    for path in env.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(root / METRICS_FOLDER)
    return env


def oldest_leftover_age_s(root: Path) -> float:
    """How long ago the newest thing in the node's work folders was last touched."""
    ages = [time.time() - (root / name).lstat().st_mtime for name in files_left(root)]
    return min(ages, default=float("inf"))


def files_left(root: Path) -> list[str]:
    """Every file and folder a node left in its work folders (its metrics aside)."""
    left = []
    for folder in WORK_FOLDERS.values():
        base = root / folder
        if base.exists():
            left += [str(path.relative_to(root)) for path in sorted(base.rglob("*"))]
    return left


@dataclass
class Node:
    """One web node: its gunicorn and its local folder."""

    name: str
    root: Path
    server: LiveGunicorn

    @property
    def url(self) -> str:
        return self.server.url

    def api(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Token {token}"}, timeout=60
        )


def web_node(name: str, root: Path, env: dict[str, str]) -> Node:
    server = LiveGunicorn(
        database_url=env["DATABASE_URL"], extra_env={**env, **node_env(root)}, workers=2
    )
    server.wait_until_serving()
    return Node(name=name, root=root, server=server)


def wait_for(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    """``condition()``'s first true value, asked every 0.2 s for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {seconds} s")


def poll(api: httpx.Client, url: str, done: Callable[[dict], bool], seconds: float) -> dict:
    """GETs ``url`` until ``done(body)``; returns the body."""
    last: dict = {}

    def check() -> bool:
        nonlocal last
        answer = api.get(url)
        assert answer.status_code == 200, answer.text[:500]
        last = answer.json()
        return done(last)

    try:
        wait_for(check, seconds, url)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answer: {last}") from None
    return last
