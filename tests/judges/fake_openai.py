"""A loopback OpenAI-compatible server for tests and benchmarks.

``FakeOpenAI(rule)`` serves ``POST /v1/chat/completions`` on 127.0.0.1 at a free port, in
daemon threads (hundreds of requests at once). Each request is answered by ``rule``:

- a ``Reply`` (the same answer every time),
- a callable ``rule(request: FakeRequest) -> Reply``,
- a list of those: the n-th request uses ``rules[n]``, the last one repeats.

Helpers build replies: ``verdict("1")``, ``by_marker("GOOD")`` (prefers the response whose
text contains the marker), ``malformed()``, ``status(429, retry_after="1")``, ``status(500)``,
``sleep(2.0)``, ``per_item([status(429)], then=verdict("1"))`` (the first answers for each
distinct item, then another). ``delay_s`` adds a fixed delay to every answer. The server
counts ``requests`` and ``connections`` (TCP connections accepted) and records
``max_in_flight`` and every ``FakeRequest``.

    with FakeOpenAI(by_marker("GOOD"), delay_s=0.1) as server:
        judge.base_url = server.base_url

From a shell or a benchmark, in its own process: ``python -m tests.judges.fake_openai
--delay-s 0.1 --marker GOOD`` prints the base URL, then serves until killed.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from judges.prompts import response_footer, response_header


@dataclass
class Reply:
    status: int = 200
    content: str | None = None  # the assistant message text (status 200)
    body: str | None = None  # a raw body instead of a chat completion
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class FakeRequest:
    body: dict
    headers: dict
    number: int

    @property
    def content_parts(self) -> list[dict]:
        content = self.body["messages"][-1]["content"]
        return [{"type": "text", "text": content}] if isinstance(content, str) else content

    @property
    def text(self) -> str:
        return "\n".join(p["text"] for p in self.content_parts if p.get("type") == "text")

    @property
    def image_urls(self) -> list[str]:
        return [p["image_url"]["url"] for p in self.content_parts if p.get("type") == "image_url"]

    def response_text(self, number: int) -> str:
        """The text of Response 1 or 2 as the judge was shown it."""
        text = self.text
        start = text.find(response_header(number))
        end = text.find(response_footer(number), max(start, 0))
        if start < 0 or end < 0:
            return ""
        return text[start + len(response_header(number)) : end]

    @property
    def item_key(self) -> str:
        return hashlib.sha256(json.dumps(self.body["messages"]).encode()).hexdigest()


Rule = Reply | Callable[[FakeRequest], Reply]


def verdict(better: str, *, confidence: float = 0.9, reasoning: str = "fake judge") -> Reply:
    answer = {"better": better, "confidence": confidence, "reasoning": reasoning}
    return Reply(content=json.dumps(answer))


def by_marker(marker: str, *, otherwise: str = "1", confidence: float = 0.9) -> Rule:
    """Prefers the response whose text contains ``marker``; ``otherwise`` when neither does."""

    def rule(request: FakeRequest) -> Reply:
        in_first = marker in request.response_text(1)
        in_second = marker in request.response_text(2)
        better = "1" if in_first and not in_second else "2" if in_second else otherwise
        return verdict(better, confidence=confidence)

    return rule


def malformed(text: str = "I think the first one, probably {not json") -> Reply:
    return Reply(content=text)


def status(code: int, *, retry_after: str | None = None, body: str = "") -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(status=code, body=body or json.dumps({"error": {"code": code}}), headers=headers)


def sleep(seconds: float, then: Rule | None = None) -> Rule:
    """Answers after ``seconds`` (past a judge's timeout, the judge sees a timeout)."""

    def rule(request: FakeRequest) -> Reply:
        reply = _resolve(then or verdict("1"), request)
        return Reply(
            reply.status, reply.content, reply.body, reply.headers, reply.delay_s + seconds
        )

    return rule


def per_item(first: list[Rule], *, then: Rule) -> Rule:
    """The k-th request for one item (same messages) gets ``first[k]``, later ones ``then``."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def rule(request: FakeRequest) -> Reply:
        with lock:
            k = seen.get(request.item_key, 0)
            seen[request.item_key] = k + 1
        return _resolve(first[k] if k < len(first) else then, request)

    return rule


def _resolve(rule: Rule, request: FakeRequest) -> Reply:
    return rule if isinstance(rule, Reply) else rule(request)


class FakeOpenAI:
    def __init__(self, rule: Rule | list[Rule] | None = None, *, delay_s: float = 0.0) -> None:
        self.rule = rule if rule is not None else verdict("1")
        self.delay_s = delay_s
        self.requests: list[FakeRequest] = []
        self.max_in_flight = 0
        self.connections = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"fake": self})
        server_class = type(
            "Server", (ThreadingHTTPServer,), {"daemon_threads": True, "request_queue_size": 1024}
        )
        self._server = server_class(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def reset(self, rule: Rule | list[Rule] | None = None) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0
            self.connections = 0
            if rule is not None:
                self.rule = rule

    # Answering ----------------------------------------------------------------------------

    def _reply_for(self, body: dict, headers: dict) -> Reply:
        with self._lock:
            request = FakeRequest(body=body, headers=headers, number=len(self.requests))
            self.requests.append(request)
            rule = self.rule
        if isinstance(rule, list):
            rule = rule[min(request.number, len(rule) - 1)]
        return _resolve(rule, request)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _connected(self) -> None:
        with self._lock:
            self.connections += 1


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # keep test output clean
        pass

    def setup(self) -> None:
        super().setup()
        self.fake._connected()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, json.dumps({"error": "not found"}), {})
            return
        self.fake._enter()
        try:
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, json.dumps({"error": "body is not JSON"}), {})
                return
            reply = self.fake._reply_for(body, dict(self.headers.items()))
            delay = self.fake.delay_s + reply.delay_s
            if delay:
                time.sleep(delay)
            if reply.body is not None:
                self._send(reply.status, reply.body, reply.headers)
                return
            content = reply.content or ""
            prompt_text = json.dumps(body.get("messages", []))
            completion = {
                "id": f"chatcmpl-fake-{len(self.fake.requests)}",
                "object": "chat.completion",
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt_text) // 4,
                    "completion_tokens": max(1, len(content) // 4),
                    "total_tokens": len(prompt_text) // 4 + max(1, len(content) // 4),
                },
            }
            self._send(reply.status, json.dumps(completion), reply.headers)
        finally:
            self.fake._leave()

    def _send(self, code: int, body: str, headers: dict) -> None:
        data = body.encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to answer


def main(argv: list[str] | None = None) -> None:
    """Serves from its own process (so a benchmark's client does not share its interpreter):
    prints the base URL on one line, then answers until killed."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--delay-s", type=float, default=0.1, help="delay before every answer")
    parser.add_argument(
        "--marker", default="", help="prefer the response containing this text (else verdict 1)"
    )
    args = parser.parse_args(argv)
    rule = by_marker(args.marker) if args.marker else verdict("1")
    server = FakeOpenAI(rule, delay_s=args.delay_s).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
