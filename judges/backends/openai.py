"""Judges served by any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, the
compatible endpoints of Gemini and Anthropic, vLLM, SGLang).

Many requests are in flight at once inside one process (asyncio + aiohttp on the process's
event loop, ``judges.backends.event_loop``, bounded by ``judge.concurrency`` for the process
across its batches), paced by ``judge.requests_per_minute``. The backend keeps its session,
and so its connections, from batch to batch until it is closed. aiohttp rather than httpx
(which Arbiter's other, low-volume clients use): a judge call is the one request Arbiter makes
thousands of times a second, and aiohttp's costs a third of httpx's CPU (docs/judges-runs.md,
"Speed"). The API key is read from
``os.environ[judge.api_key_env]`` at call time and is redacted from everything recorded.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import os
import random
import ssl
import time
import urllib.parse
import urllib.request
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
import certifi
import orjson

from annotation.media.judge_images import MediaUnavailable, image_data_url
from annotation.media.judge_parts import audio_input, audio_pair_input, video_frames
from judges.backends.base import JudgeBackend, JudgeItem, JudgeResult, done_future, results_of
from judges.backends.event_loop import on_loop_each, run_on_loop, running_loop
from judges.backends.model3d import MODEL3D, items_with_rendered_views
from judges.core.images import media_rows
from judges.core.keys import api_key_env_allowed, api_key_env_refusal, redact
from judges.parsing import UnparseableAnswer, parse_verdict
from judges.prompts import AUDIO_PAIR, PromptSpec, build_prompt

logger = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BASE_S = 1.0
DEFAULT_RETRY_MAX_S = 30.0
# How much of an error body a verdict keeps (after the key is redacted from it).
ERROR_BODY_CHARS = 300
# Media part kinds whose bytes go into the request (a judge is refused the others).
_SENT_MEDIA = ("image", "video", "audio")


@dataclass
class _Pool:
    """A backend's session (its connections) on one event loop, and the slots that bound its
    calls in flight."""

    loop: asyncio.AbstractEventLoop
    session: aiohttp.ClientSession
    slots: asyncio.Semaphore
    pacing: asyncio.Lock

    async def aclose(self) -> None:
        await self.session.close()


@dataclass
class _Attempt:
    """What one HTTP attempt gave: a result to return, or a transient failure to retry."""

    result: JudgeResult | None = None
    failure: str = ""
    retry_after_s: float | None = None
    latency_ms: int | None = None


class OpenAIBackend(JudgeBackend):
    def __init__(self, judge) -> None:
        super().__init__(judge)
        options = judge.options or {}
        self.max_retries = int(options.get("max_retries", DEFAULT_MAX_RETRIES))
        self.retry_base_s = float(options.get("retry_base_s", DEFAULT_RETRY_BASE_S))
        self.retry_max_s = float(options.get("retry_max_s", DEFAULT_RETRY_MAX_S))
        self.rubrics = options.get("rubrics") or {}
        self.prompt = PromptSpec.from_options(options)
        self.url = judge.base_url.rstrip("/") + "/chat/completions"
        self.proxy = env_proxy(self.url)
        # Start of the next request slot under requests_per_minute, across batches.
        self._next_slot = 0.0
        self._pool: _Pool | None = None  # built on the loop by the first call

    def __repr__(self) -> str:
        return f"<OpenAIBackend judge={self.judge.name!r} model={self.judge.model!r}>"

    def judge_batch(self, items: list[JudgeItem]) -> list[JudgeResult]:
        return results_of(self.submit(items))

    def submit(self, items: list[JudgeItem]) -> list[Future[JudgeResult]]:
        if not items:
            return []
        env_name = self.judge.api_key_env
        if env_name and not api_key_env_allowed(env_name):
            # A judge stored before the pattern was enforced: the variable is never read.
            message = f"judge {self.judge.name}: {api_key_env_refusal()}"
            return [done_future(JudgeResult(outcome="error", error=message)) for _ in items]
        api_key = os.environ.get(env_name, "") if env_name else ""
        if env_name and not api_key:
            message = f"environment variable {env_name} is not set"
            return [done_future(JudgeResult(outcome="error", error=message)) for _ in items]
        # Database reads and image encoding happen here, in the caller's thread.
        requests = self._requests(items)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        calls = iter(
            on_loop_each(
                [
                    self._judge_one(item, request, headers, api_key)
                    for item, request in zip(items, requests, strict=True)
                    if not isinstance(request, JudgeResult)
                ]
            )
        )
        return [
            done_future(request) if isinstance(request, JudgeResult) else next(calls)
            for request in requests
        ]

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None or pool.loop is not running_loop():
            return  # a loop that is gone (stopped, or another process's) took them with it
        try:
            run_on_loop(pool.aclose(), timeout=5)
        except Exception:  # closing is best effort: the sockets go with the process
            logger.warning("judge %s: its HTTP session did not close", self.judge.name)

    # Building requests --------------------------------------------------------------------

    def _requests(self, items: list[JudgeItem]) -> list[dict | JudgeResult]:
        # A 3D part is sent as its rendered views (judges/backends/model3d.py).
        shown = items_with_rendered_views(items)
        prompts = [
            build_prompt(item, rubrics=self.rubrics, spec=self.prompt)
            if isinstance(item, JudgeItem)
            else None
            for item in shown
        ]
        wanted = {
            _media_key(part)
            for parts in prompts
            for part in parts or ()
            if part["type"] in (*_SENT_MEDIA, AUDIO_PAIR)
        }
        rows = media_rows({sha for _, shas in wanted for sha in shas})
        sent: dict[tuple[str, tuple[str, ...]], list[dict] | MediaUnavailable] = {}
        for kind, shas in wanted:
            if missing := [sha for sha in shas if sha not in rows]:
                name = "audio" if kind == AUDIO_PAIR else kind
                sent[kind, shas] = MediaUnavailable(
                    f"{name} {missing[0][:12]} is not in the media store"
                )
                continue
            try:
                sent[kind, shas] = self._media_content(kind, [rows[sha] for sha in shas])
            except MediaUnavailable as exc:
                sent[kind, shas] = exc
        return [
            self._payload(parts, sent) if parts is not None else cast(JudgeResult, item)
            for item, parts in zip(shown, prompts, strict=True)
        ]

    def _media_content(self, kind: str, media: list) -> list[dict]:
        """The content parts that carry one media part of ``kind`` to the endpoint (an
        ``audio_pair`` part names two clips, sent as one: judges.prompts.AUDIO_PAIR)."""
        if kind == AUDIO_PAIR:
            return [{"type": "input_audio", "input_audio": audio_pair_input(*media)}]
        (one,) = media
        if kind == "video":
            return self._video_content(one)
        if kind == "audio":
            return _audio_content(one)
        url = image_data_url(one, max_side=self.judge.max_image_side)
        return [{"type": "image_url", "image_url": {"url": url}}]

    def _video_content(self, media) -> list[dict]:
        """Frames sampled uniformly, each after a text part giving its timestamp."""
        frames = video_frames(
            media, count=self.judge.video_frames, max_side=self.judge.video_frame_side
        )
        seconds = media.duration_seconds or 0.0
        content: list[dict] = [
            {
                "type": "text",
                "text": f"Video of {seconds:.2f} s, {len(frames)} frames sampled uniformly:",
            }
        ]
        for frame in frames:
            content.append({"type": "text", "text": frame.label})
            content.append({"type": "image_url", "image_url": {"url": frame.data_url}})
        return content

    def received_parts(self) -> frozenset[str]:
        return frozenset(
            {"text", "image", "video", MODEL3D, *(("audio",) if self.judge.takes_audio else ())}
        )

    def refusal(self, kinds: list[str]) -> str:
        if "audio" not in kinds or self.judge.takes_audio:
            return super().refusal(kinds)
        others = [kind for kind in kinds if kind != "audio"]
        return (
            f"this pair has audio parts, and judge {self.judge.name} does not take audio "
            "(takes_audio is off)"
            + (f"; nor is it sent {', '.join(others)} parts" if others else "")
        )

    def _payload(self, prompt: list[dict], sent: dict) -> dict | JudgeResult:
        content = []
        for part in prompt:
            if part["type"] == "text":
                content.append({"type": "text", "text": part["text"]})
                continue
            parts = sent[_media_key(part)]
            if isinstance(parts, MediaUnavailable):
                return JudgeResult(outcome="error", error=str(parts))
            content.extend(parts)
        return {
            "model": self.judge.model,
            "messages": [{"role": "user", "content": content}],
            "temperature": self.judge.temperature,
            "max_tokens": self.judge.max_tokens,
        }

    # Calling ------------------------------------------------------------------------------

    async def _pool_here(self) -> _Pool:
        """The session and slots on the running loop, built on first use: at most
        ``concurrency`` calls in flight, each on a connection of its own, kept alive."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._pool.loop is loop:
            return self._pool
        concurrency = max(1, self.judge.concurrency)
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency, ssl=_ssl_context()),
            # The whole call, from connecting to the body's last byte.
            timeout=aiohttp.ClientTimeout(total=self.judge.timeout_s),
        )
        slots = asyncio.Semaphore(concurrency)
        self._pool = _Pool(loop=loop, session=session, slots=slots, pacing=asyncio.Lock())
        return self._pool

    async def _judge_one(
        self, item: JudgeItem, payload: dict, headers: dict, api_key: str
    ) -> JudgeResult:
        pool = await self._pool_here()
        return _redacted(await self._call(pool, item, payload, headers, api_key), api_key)

    async def _call(
        self, pool: _Pool, item: JudgeItem, payload: dict, headers: dict, api_key: str
    ) -> JudgeResult:
        attempt = _Attempt()
        body = orjson.dumps(payload)
        for number in range(self.max_retries + 1):
            await self._pace(pool.pacing)
            async with pool.slots:
                attempt = await self._attempt(pool.session, item, body, headers, api_key)
            if attempt.result is not None:
                attempt.result.attempts = number + 1
                return attempt.result
            if number < self.max_retries:
                delay = self._backoff_s(number, attempt.retry_after_s)
                logger.info(
                    "judge %s: %s; retry %d in %.2fs",
                    self.judge.name,
                    attempt.failure,
                    number + 1,
                    delay,
                )
                await asyncio.sleep(delay)
        return JudgeResult(
            outcome="error",
            error=f"{attempt.failure} (gave up after {self.max_retries + 1} attempts)",
            transient=True,
            latency_ms=attempt.latency_ms,
            attempts=self.max_retries + 1,
        )

    async def _attempt(
        self,
        session: aiohttp.ClientSession,
        item: JudgeItem,
        payload: bytes,
        headers: dict,
        api_key: str,
    ) -> _Attempt:
        started = time.perf_counter()
        try:
            async with session.post(
                self.url, data=payload, headers=headers, proxy=self.proxy, allow_redirects=False
            ) as response:
                raw = await response.read()
        except TimeoutError:  # the session's timeout, aiohttp's ServerTimeoutError among them
            return _Attempt(
                failure=f"timed out after {self.judge.timeout_s:g}s",
                latency_ms=_elapsed_ms(started),
            )
        except aiohttp.ClientError as exc:
            return _Attempt(
                failure=f"connection error ({type(exc).__name__})", latency_ms=_elapsed_ms(started)
            )
        except ValueError:
            # aiohttp refuses, before sending, a header with a control character: an API key
            # read from a file with its newline. The same for every call, so not retried; the
            # item fails alone, as httpx's refusal did.
            error = "the request was not sent: a header holds a control character (the API key?)"
            return _Attempt(
                JudgeResult(outcome="error", error=error, latency_ms=_elapsed_ms(started))
            )
        latency_ms = _elapsed_ms(started)
        status = response.status
        if status == 429 or status >= 500:
            return _Attempt(
                failure=f"HTTP {status}",
                retry_after_s=_retry_after_s(response.headers.get("retry-after")),
                latency_ms=latency_ms,
            )
        # Redacted before anything is cut to length: a cut could split the key, and the
        # half left would escape the replacement.
        body = redact(_text(raw, response.charset), api_key)
        if status >= 400:
            error = f"HTTP {status}: {body[:ERROR_BODY_CHARS]}"
            return _Attempt(JudgeResult(outcome="error", error=error, latency_ms=latency_ms))
        return _Attempt(_result(body, item, latency_ms, self.prompt.answer_format))

    async def _pace(self, pacing: asyncio.Lock) -> None:
        """Spaces request starts evenly at ``requests_per_minute`` (0: no limit)."""
        rpm = self.judge.requests_per_minute
        if not rpm:
            return
        async with pacing:
            now = time.monotonic()
            slot = max(now, self._next_slot)
            self._next_slot = slot + 60.0 / rpm
        if slot > now:
            await asyncio.sleep(slot - now)

    def _backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Exponential backoff with jitter; a server's Retry-After wins, within the cap."""
        if retry_after_s is not None:
            return min(retry_after_s, self.retry_max_s) + random.uniform(0, self.retry_base_s / 4)
        ceiling = min(self.retry_max_s, self.retry_base_s * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """Built once a process, for every judge: loading the CA bundle costs milliseconds. The
    certificates httpx trusts: SSL_CERT_FILE or SSL_CERT_DIR when set, else certifi's."""
    if cafile := os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, less the hosts in ``NO_PROXY``), as httpx honoured them; aiohttp's own
    ``trust_env`` would also send ``~/.netrc`` credentials to the judge."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def _text(raw: bytes, charset: str | None) -> str:
    """A response body as text: its declared charset, else UTF-8; bytes that do not decode
    are replaced (as httpx's ``Response.text`` does)."""
    try:
        return raw.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return raw.decode("utf-8", errors="replace")


def _media_key(part: dict) -> tuple[str, tuple[str, ...]]:
    """A media part's kind and the hashes it names (two for an ``audio_pair``)."""
    media = part["media"]
    return part["type"], tuple(media) if isinstance(media, list) else (media,)


def _audio_content(media) -> list[dict]:
    return [{"type": "input_audio", "input_audio": audio_input(media)}]


def _result(body: str, item: JudgeItem, latency_ms: int, answer_format: str) -> JudgeResult:
    """The verdict in a response ``body`` (already redacted)."""
    try:
        data = json.loads(body)
        message = data["choices"][0]["message"]
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError):
        return JudgeResult(
            outcome="error",
            error=f"not a chat completion: {body[:ERROR_BODY_CHARS]}",
            latency_ms=latency_ms,
        )
    content = message.get("content") or ""
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    common: dict[str, Any] = {
        "raw": str(content),
        "latency_ms": latency_ms,
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
    }
    try:
        verdict = parse_verdict(str(content), allow_tie=item.allow_tie, answer_format=answer_format)
    except UnparseableAnswer as exc:
        return JudgeResult(outcome="unparseable", error=str(exc), **common)
    return JudgeResult(
        outcome="ok",
        preferred=verdict.preferred,
        confidence=verdict.confidence,
        reasoning=verdict.reasoning,
        **common,
    )


def _redacted(result: JudgeResult, api_key: str) -> JudgeResult:
    """Removes the key from everything a server could have echoed back, also where the body's
    JSON escaped it (the answer is read from the decoded JSON)."""
    for name in ("raw", "reasoning", "error"):
        setattr(result, name, redact(getattr(result, name), api_key))
    return result


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After as seconds (a number or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _count(value) -> int | None:
    # ``True`` is an int to Python, not a token count.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
