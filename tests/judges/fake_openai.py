"""A loopback OpenAI-compatible server for tests and benchmarks.

``FakeOpenAI(rule)`` serves ``POST /v1/chat/completions`` on 127.0.0.1 at a free port, from
an asyncio event loop in a daemon thread: HTTP/1.1 with keep-alive, hundreds of requests at
once, each delay waited on the loop rather than in a thread of its own, so that a benchmark's
stand-in for a remote judge costs little of the machine's CPU (docs/judges-runs.md, "Speed").
Each request is answered by ``rule``, called on the loop (a rule must not block):

- a ``Reply`` (the same answer every time),
- a callable ``rule(request: FakeRequest) -> Reply``,
- a list of those: the n-th request uses ``rules[n]``, the last one repeats.

Helpers build replies: ``verdict("1")``, ``by_marker("GOOD")`` (prefers the response whose
text contains the marker), ``malformed()``, ``status(429, retry_after="1")``, ``status(500)``,
``sleep(2.0)``, ``per_item([status(429)], then=verdict("1"))`` (the first answers for each
distinct item, then another). ``delay_s`` adds a fixed delay to every answer. It answers as a
proxy too (the absolute URL in the request line). The server counts ``requests`` and
``connections`` (TCP connections accepted) and records
``max_in_flight`` and every ``FakeRequest``.

    with FakeOpenAI(by_marker("GOOD"), delay_s=0.1) as server:
        judge.base_url = server.base_url

From a shell or a benchmark, in its own process: ``python -m tests.judges.fake_openai
--delay-s 0.1 --marker GOOD`` prints the base URL, then serves until killed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import traceback
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.Transport] = set()

    # Lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fake-openai", daemon=True
        )
        self._thread.start()
        listening = self._loop.create_server(
            lambda: _Connection(self), "127.0.0.1", 0, backlog=1024
        )
        self._server = asyncio.run_coroutine_threadsafe(listening, self._loop).result()
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        self._loop = self._thread = self._server = None

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for transport in list(self._open):  # kept-alive connections end with the server
            transport.close()
        await self._server.wait_closed()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

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

    def _completion(self, body: dict, content: str) -> str:
        prompt_text = json.dumps(body.get("messages", []))
        return json.dumps(
            {
                "id": f"chatcmpl-fake-{len(self.requests)}",
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
        )

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _connected(self, transport: asyncio.Transport) -> None:
        self._open.add(transport)
        with self._lock:
            self.connections += 1


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests with a ``Content-Length`` body, answered one
    at a time and in order, the connection kept alive unless the client asks otherwise."""

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.answering = False  # a request is being answered; the next one waits
        self.keep_alive = True

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.fake._connected(transport)

    def connection_lost(self, exc) -> None:
        self.fake._open.discard(self.transport)
        self.transport = None  # a reply still due (the client gave up) is dropped

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next_request()

    def _next_request(self) -> None:
        if self.answering or self.transport is None:
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
            headers = dict(_header(line) for line in lines[1:])
            lower = {name.lower(): value for name, value in headers.items()}
            length = int(lower.get("content-length") or 0)
        except ValueError:
            self.keep_alive = False
            self._send(400, json.dumps({"error": "malformed request"}), {})
            return
        if len(self.buffer) < end + 4 + length:
            return  # the rest of the body is still on its way
        raw = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        connection = lower.get("connection", "").lower()
        self.keep_alive = connection != "close" and (
            version == "HTTP/1.1" or connection == "keep-alive"
        )
        self.answering = True
        self._answer(method, target, headers, raw)

    def _answer(self, method: str, target: str, headers: dict, raw: bytes) -> None:
        if method != "POST":
            self._send(501, json.dumps({"error": f"unsupported method {method}"}), {})
            return
        # A proxy is sent the absolute form (http://host/v1/...): the path is what counts.
        if urllib.parse.urlsplit(target).path.rstrip("/") != "/v1/chat/completions":
            self._send(404, json.dumps({"error": "not found"}), {})
            return
        fake = self.fake
        fake._enter()
        try:
            body = json.loads(raw)
        except ValueError:
            fake._leave()
            self._send(400, json.dumps({"error": "body is not JSON"}), {})
            return
        try:
            reply = fake._reply_for(body, headers)
        except Exception:
            fake._leave()
            traceback.print_exc()  # a broken rule: the client sees the connection drop
            if self.transport is not None:
                self.transport.close()
            return
        delay = fake.delay_s + reply.delay_s
        if delay:
            asyncio.get_running_loop().call_later(delay, self._reply, body, reply)
        else:
            self._reply(body, reply)

    def _reply(self, body: dict, reply: Reply) -> None:
        self.fake._leave()
        if reply.body is not None:
            self._send(reply.status, reply.body, reply.headers)
        else:
            completion = self.fake._completion(body, reply.content or "")
            self._send(reply.status, completion, reply.headers)

    def _send(self, code: int, body: str, headers: dict) -> None:
        self.answering = False
        if self.transport is None:
            return  # the client gave up (a timeout test); nothing to answer
        data = body.encode()
        head = [
            f"HTTP/1.1 {code} {_reason(code)}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        if not self.keep_alive:
            head.append("Connection: close")
        self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        if self.keep_alive:
            self._next_request()
        else:
            self.transport.close()


def _header(line: str) -> tuple[str, str]:
    name, colon, value = line.partition(":")
    if not colon:
        raise ValueError(f"not a header: {line!r}")
    return name.strip(), value.strip()


def _reason(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return ""


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
