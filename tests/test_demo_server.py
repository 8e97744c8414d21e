"""The development server as ``make demo`` starts it (``runserver``, no ``DJANGO_DEBUG``) runs
like production where it matters: a 404 is the site's own page, never Django's debug page
listing every URL pattern, and WhiteNoise serves the static files (with DEBUG off,
``runserver`` serves none). ``DJANGO_DEBUG=1`` brings the debug pages back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What Django's debug 404 page says before it lists the URL patterns.
URL_LIST = "Using the URLconf defined in"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@contextmanager
def _demo_server(**env: str) -> Iterator[str]:
    """``manage.py runserver HOST:PORT --noreload``, as the Makefile's demo target runs it,
    with the environment of ``make demo`` (development, no DJANGO_DEBUG) plus ``env``."""
    port = _free_port()
    environ = {k: v for k, v in os.environ.items() if k != "DJANGO_DEBUG"}
    environ.update({"CELERY_BROKER_URL": "memory://", "ARBITER_ENV": "development", **env})
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/favicon.ico")
                break
            except OSError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_the_demo_server_answers_a_404_with_the_sites_page_and_serves_static_files():
    with _demo_server() as base:
        status, body = _get(f"{base}/no-such-page/")
        css_status, css = _get(f"{base}/static/css/arbiter.css")
        script_status, script = _get(f"{base}/static/js/viewer.js")
    page = body.decode()
    assert status == 404
    assert 'class="card error-page"' in page
    assert "Page not found" in page
    assert URL_LIST not in page
    assert "admin/" not in page
    assert "DEBUG" not in page
    assert css_status == 200
    assert css == (ROOT / "static/css/arbiter.css").read_bytes()
    assert script_status == 200
    assert script == (ROOT / "static/js/viewer.js").read_bytes()


def test_django_debug_1_brings_back_the_debug_pages():
    with _demo_server(DJANGO_DEBUG="1") as base:
        status, body = _get(f"{base}/no-such-page/")
        css_status, _ = _get(f"{base}/static/css/arbiter.css")
    assert status == 404
    assert URL_LIST in body.decode()
    assert css_status == 200
