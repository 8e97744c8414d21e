"""A real HTTP receiver on loopback for the webhook tests (a threaded ``http.server``): it
answers each POST with the next status of its script (the last one repeated), or holds the
connection without answering, and records every request as it arrived."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from annotation.webhooks.services import webhook_create
from tests.factories import MembershipFactory, UserFactory


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    statuses: list[int] = field(default_factory=lambda: [200])
    # Seconds to hold each request before answering (longer than the sender's timeout: never).
    hold_s: float = 0.0
    requests: list[Received] = field(default_factory=list)


@pytest.fixture
def receiver():
    """``receiver(statuses=[...], hold_s=...)``: a started receiver, stopped after the test."""
    servers: list[ThreadingHTTPServer] = []
    released = threading.Event()

    def start(statuses: list[int] | None = None, hold_s: float = 0.0) -> Receiver:
        state = Receiver(url="", statuses=list(statuses or [200]), hold_s=hold_s)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                state.requests.append(Received(dict(self.headers.items()), body))
                if state.hold_s:
                    released.wait(state.hold_s)
                index = min(len(state.requests), len(state.statuses)) - 1
                answer = b'{"seen": true}'
                self.send_response(state.statuses[index])
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        return state

    yield start
    released.set()
    for server in servers:
        server.shutdown()
        server.server_close()
    time.sleep(0)


@pytest.fixture(autouse=True)
def _private_targets_allowed(settings):
    """The receivers listen on loopback, which only this setting lets webhooks reach."""
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = True
    settings.ARBITER_WEBHOOK_TIMEOUT_S = 1
    settings.ARBITER_WEBHOOK_BACKOFF_S = 0


@pytest.fixture
def hooked(project):
    """``hooked(url, events=...)``: an active endpoint of ``project`` at ``url``."""

    def make(url: str, events: tuple[str, ...] = ("pair.decided", "pair.escalated")):
        return webhook_create(project=project, url=url, events=list(events))

    return make


@pytest.fixture
def outsider_curator(other_project):
    user = UserFactory(username="olga")
    MembershipFactory(project=other_project, user=user, role="curator")
    return user
