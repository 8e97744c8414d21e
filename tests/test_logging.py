"""Logs: one JSON line per request, also under the development server that ``make demo``
runs (which would add its own plain line for every 4xx and 5xx)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

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
