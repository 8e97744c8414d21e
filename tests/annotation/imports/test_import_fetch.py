"""Images by URL: only when the project allows it, only http(s), never to a loopback,
private, link-local or reserved address (each resolved address and each redirect checked),
with size and time limits. A refused URL leaves nothing imported."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from annotation.core import addresses
from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.models import Media, Pair
from tests.annotation.imports.conftest import (
    assert_nothing_imported,
    image_bytes,
    image_pair,
    write_jsonl,
)
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

PNG = image_bytes((10, 200, 10))


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """No test here may open a connection off this machine, whatever the code under test
    does: a connection to any address but loopback fails the test."""
    real_connect = socket.socket.connect
    attempts: list[str] = []

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and not ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
        ):
            attempts.append(host)
            raise AssertionError(f"the test tried to connect to {host}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    yield attempts
    assert attempts == [], f"connections attempted off loopback: {attempts}"


@pytest.fixture
def url_project(db):
    return ProjectFactory(slug="urls", name="URLs", allow_media_urls=True)


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict] = {}  # shared by the server's handlers, set by the test
    seen: ClassVar[list] = []

    def do_GET(self):  # http.server's naming
        self.seen.append(self.path)
        status, headers, body = self.routes.get(self.path, (404, {}, b"not found"))
        if callable(body):
            body = body()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def local_server():
    """An HTTP server on 127.0.0.1; ``routes`` maps paths to (status, headers, body)."""
    handler = type("Handler", (_Handler,), {"routes": {}, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    server.routes = handler.routes
    server.seen = handler.seen
    yield server
    server.shutdown()
    server.server_close()


def public_for_first_check(monkeypatch) -> list:
    """The address check lets 127.0.0.1 through once (the first hop, our stand-in for a
    public server) and is the real check afterwards."""
    real = addresses.address_is_public
    calls = []

    def check(address):
        calls.append(str(address))
        return len(calls) == 1 or real(address)

    monkeypatch.setattr(addresses, "address_is_public", check)
    return calls


def import_urls(project, tmp_path, url_a: str, url_b: str):
    path = write_jsonl(tmp_path / "p.jsonl", [image_pair("p1", url_a, url_b)])
    return pairs_import(project=project, source=path)


def refused_urls(project, tmp_path, url_a: str, url_b: str) -> ImportFailed:
    with pytest.raises(ImportFailed) as info:
        import_urls(project, tmp_path, url_a, url_b)
    return info.value


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:169.254.169.254", False),
        ("2002:7f00:1::", False),
        ("ff02::1", False),
    ],
)
def test_address_check(address, public):
    assert addresses.address_is_public(ipaddress.ip_address(address)) is public


def test_url_to_loopback_is_refused(url_project, tmp_path, local_server):
    local_server.routes["/a.png"] = (200, {"Content-Type": "image/png"}, PNG)
    url = f"{local_server.base}/a.png"
    failure = refused_urls(url_project, tmp_path, url, url)
    issue = failure.issues[0]
    assert (issue.line, issue.field) == (1, "response_a.response_content[0]")
    assert "resolves to 127.0.0.1, which is not a public address" in issue.message
    assert local_server.seen == []  # refused before connecting
    assert_nothing_imported(url_project)


def test_url_to_cloud_metadata_address_is_refused(url_project, tmp_path):
    url = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
    failure = refused_urls(url_project, tmp_path, url, url)
    assert "169.254.169.254, which is not a public address" in failure.issues[0].message
    assert_nothing_imported(url_project)


def test_every_resolved_address_is_checked(url_project, tmp_path, monkeypatch):
    def resolve(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", resolve)
    url = "https://images.example.com/a.png"
    failure = refused_urls(url_project, tmp_path, url, url)
    assert "'images.example.com' resolves to 10.0.0.7" in failure.issues[0].message
    assert_nothing_imported(url_project)


def test_a_resolved_address_that_is_not_an_ip_is_refused(url_project, tmp_path, monkeypatch):
    def resolve(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (0, b"\x00\x01"))]

    monkeypatch.setattr(addresses.socket, "getaddrinfo", resolve)
    url = "https://images.example.com/a.png"
    failure = refused_urls(url_project, tmp_path, url, url)
    assert "'images.example.com' resolves to 0, which is not an IP address" in (
        failure.issues[0].message
    )
    assert_nothing_imported(url_project)


@pytest.mark.parametrize("target", ["loopback", "private"])
def test_redirect_to_a_private_address_is_refused(
    url_project, tmp_path, local_server, monkeypatch, target
):
    location = (
        f"{local_server.base}/image.png" if target == "loopback" else "http://10.20.30.40/x.png"
    )
    local_server.routes["/start"] = (302, {"Location": location}, b"")
    local_server.routes["/image.png"] = (200, {"Content-Type": "image/png"}, PNG)
    checked = public_for_first_check(monkeypatch)
    url = f"{local_server.base}/start"
    failure = refused_urls(url_project, tmp_path, url, url)
    address = "127.0.0.1" if target == "loopback" else "10.20.30.40"
    assert f"resolves to {address}, which is not a public address" in failure.issues[0].message
    assert checked == ["127.0.0.1", address]
    assert local_server.seen == ["/start"]  # the redirect target was never contacted
    assert_nothing_imported(url_project)


def test_fetched_image_is_imported_when_every_hop_is_public(
    url_project, tmp_path, local_server, monkeypatch, settings
):
    """The control for the tests above: the same server, with the check passing."""
    from pathlib import Path

    local_server.routes["/start"] = (302, {"Location": "/image.png"}, b"")
    local_server.routes["/image.png"] = (200, {"Content-Type": "image/png"}, PNG)
    monkeypatch.setattr(addresses, "address_is_public", lambda address: True)
    url = f"{local_server.base}/start"
    summary = import_urls(url_project, tmp_path, url, url)
    assert (summary.created_pairs, summary.media_created) == (1, 1)
    assert local_server.seen == ["/start", "/image.png"]  # fetched once for both sides
    media = Media.objects.get()
    assert (Path(settings.MEDIA_ROOT) / media.relative_path).read_bytes() == PNG
    assert Pair.objects.get().response_a.media_hashes == [media.sha256]


def test_url_when_the_project_does_not_allow_it_is_refused(project, tmp_path, local_server):
    url = f"{local_server.base}/a.png"
    with pytest.raises(ImportFailed) as info:
        import_urls(project, tmp_path, url, url)
    assert "this project does not fetch media by URL" in info.value.issues[0].message
    assert local_server.seen == []
    assert_nothing_imported(project)


@pytest.mark.parametrize("url", ["ftp://example.org/a.png", "file:///etc/passwd"])
def test_only_http_and_https_urls(url_project, tmp_path, url):
    failure = refused_urls(url_project, tmp_path, url, url)
    assert "an image is a path in the media folder or an http(s) URL" in str(failure)
    assert_nothing_imported(url_project)


def test_oversized_download_is_refused(url_project, tmp_path, local_server, monkeypatch, settings):
    settings.ARBITER_MAX_IMAGE_BYTES = 1000
    local_server.routes["/big.png"] = (200, {}, image_bytes(size=(400, 400)) + b"\0" * 5000)
    monkeypatch.setattr(addresses, "address_is_public", lambda address: True)
    url = f"{local_server.base}/big.png"
    failure = refused_urls(url_project, tmp_path, url, url)
    assert "the image is larger than 1000 bytes" in failure.issues[0].message
    assert_nothing_imported(url_project)


def test_redirect_loops_stop(url_project, tmp_path, local_server, monkeypatch, settings):
    settings.ARBITER_FETCH_MAX_REDIRECTS = 3
    local_server.routes["/loop"] = (302, {"Location": "/loop"}, b"")
    monkeypatch.setattr(addresses, "address_is_public", lambda address: True)
    url = f"{local_server.base}/loop"
    failure = refused_urls(url_project, tmp_path, url, url)
    assert "more than 3 redirects" in failure.issues[0].message
    assert len(local_server.seen) == 4
    assert_nothing_imported(url_project)


def test_slow_server_times_out(url_project, tmp_path, local_server, monkeypatch, settings):
    settings.ARBITER_FETCH_TIMEOUT_S = 1

    def slow():
        time.sleep(2.5)
        return PNG

    local_server.routes["/slow.png"] = (200, {}, slow)
    monkeypatch.setattr(addresses, "address_is_public", lambda address: True)
    url = f"{local_server.base}/slow.png"
    started = time.monotonic()
    failure = refused_urls(url_project, tmp_path, url, url)
    assert time.monotonic() - started < 2.4
    assert "Timeout" in failure.issues[0].message or "timed out" in failure.issues[0].message
    assert_nothing_imported(url_project)
