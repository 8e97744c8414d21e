"""An S3 server for the tests: moto's server mode in a child process on a free loopback port,
one per test process, with one bucket; ``s3_storage`` switches a test to ``ARBITER_STORAGE=s3``
under a prefix of its own (so tests never see each other's objects).

    def test_something(s3_storage):
        s3_storage.client.list_objects_v2(Bucket=s3_storage.bucket, Prefix=s3_storage.prefix)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_gunicorn import ROOT, free_port

START_TIMEOUT_S = 30
BUCKET = "arbiter-test"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "arbiter-test-key",
    "AWS_SECRET_ACCESS_KEY": "arbiter-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """``python -m moto.server`` on 127.0.0.1; ``url`` is its endpoint."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        # The line compose's S3 service runs (deploy/commands.sh, docs/deploy.md), this
        # interpreter first on the PATH.
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.process = subprocess.Popen(
            [str(ROOT / "deploy" / "commands.sh"), "s3", "127.0.0.1", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **CREDENTIALS, "PATH": path},
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto's server exited during start-up:\n{self.log()}")
            try:
                httpx.get(self.url, timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto's server did not answer within {START_TIMEOUT_S} s")

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@dataclass(frozen=True)
class S3Storage:
    """The bucket a test writes to and its prefix, with a client to look inside."""

    server: S3Server
    bucket: str
    prefix: str
    client: Any

    def keys(self, area: str = "") -> list[str]:
        """Every key under the test's prefix (or one of its areas), sorted."""
        prefix = f"{self.prefix}/{area}/" if area else f"{self.prefix}/"
        keys: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            keys += [item["Key"] for item in page.get("Contents", [])]
        return sorted(keys)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    import boto3

    server = S3Server()
    try:
        client = boto3.client(
            "s3",
            endpoint_url=server.url,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        )
        client.create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_storage(s3_server: S3Server, settings) -> S3Storage:
    """Switches this test to ``ARBITER_STORAGE=s3`` on the test server, under a fresh prefix."""
    from annotation.core.storage import s3_client

    prefix = f"test-{uuid.uuid4().hex[:12]}"
    settings.ARBITER_STORAGE = "s3"
    settings.ARBITER_S3_BUCKET = BUCKET
    settings.ARBITER_S3_ENDPOINT_URL = s3_server.url
    settings.ARBITER_S3_PREFIX = prefix
    for name, value in CREDENTIALS.items():
        setattr(settings, name, value)
    return S3Storage(server=s3_server, bucket=BUCKET, prefix=prefix, client=s3_client())
