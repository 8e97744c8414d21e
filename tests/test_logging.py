"""Logs: one JSON line per request, also under the development server that ``make demo``
runs (which would add its own plain line for every 4xx and 5xx)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.urls import reverse

from annotation.models import ImportJob
from config.logging import JsonFormatter, RequestIdFilter
from tests.annotation.imports.conftest import jsonl_bytes, text_pair, upload

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_development_server_prints_one_json_line_per_request(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "CELERY_BROKER_URL": "memory://",
        "ARBITER_ENV": "development",
        "ARBITER_LOG_LEVEL": "INFO",
    }
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/favicon.ico")
                break
            except OSError:
                assert server.poll() is None
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert _get(f"{base}/no-such-page") == 404
        assert _get(f"{base}/login/") == 200
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    lines = [line for line in output.splitlines() if "/no-such-page" in line or "/login/" in line]
    assert len(lines) == 2, output
    records = [json.loads(line) for line in lines]
    assert [(r["path"], r["status"]) for r in records] == [("/no-such-page", 404), ("/login/", 200)]


# The request id ----------------------------------------------------------------------------


@pytest.fixture
def log_lines():
    """What the console handler writes (JSON, with the request id filter), as records."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)


def test_a_well_formed_request_id_is_kept_and_returned(client, db):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="lb-7f3a9c21.0001")
    assert response["X-Request-ID"] == "lb-7f3a9c21.0001"


@pytest.mark.parametrize("given", ["", "short", "has space inside", "x" * 129, "a\nb-ccccccc"])
def test_a_missing_or_malformed_request_id_is_replaced(client, db, given):
    response = client.get("/healthz", HTTP_X_REQUEST_ID=given)
    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])


def test_every_line_a_request_logs_carries_its_id(client, db, monkeypatch, log_lines):
    """The request line and the error Django logs while answering a 503 alike."""
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", f"redis://127.0.0.1:{_free_port()}/0")
    response = client.get("/readyz", HTTP_X_REQUEST_ID="probe-00000001")
    assert response.status_code == 503
    lines = [line for line in log_lines() if line.get("request_id") == "probe-00000001"]
    assert {line["logger"] for line in lines} >= {"arbiter.request", "django.request"}
    assert all(line["request_id"] == "probe-00000001" for line in log_lines())


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_the_request_id_follows_an_import_into_its_task(
    celery_worker_process, project, carol, client_for
):
    """Sent in the task's headers; the worker logs the task's start and its lines with it."""
    worker = celery_worker_process(queues="imports", concurrency=1)
    response = client_for(carol).post(
        reverse("imports", args=[project.slug]),
        {"file": upload("pairs.jsonl", jsonl_bytes([text_pair("r1")]))},
        HTTP_X_REQUEST_ID="curator-import-0001",
    )
    assert response.status_code == 302, response.content[:500]
    job = ImportJob.objects.get(project=project)
    deadline = time.monotonic() + 60
    while not ImportJob.objects.get(pk=job.pk).finished:
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.2)
    records = [json.loads(row) for row in worker.log().splitlines() if row.startswith("{")]
    tagged = [record for record in records if record.get("request_id") == "curator-import-0001"]
    started = [record for record in tagged if record["msg"] == "task started"]
    assert [record["task"] for record in started] == ["annotation.tasks.import_run"], records
    assert any("succeeded" in record["msg"] for record in tagged)
