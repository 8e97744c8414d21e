"""One signed POST to an endpoint (docs/webhooks.md, "Security"): the host is resolved once,
every address it gives must be public unless ARBITER_WEBHOOK_ALLOW_PRIVATE, and the request
goes to the checked address with the name as Host header and TLS server name (the
certificate is verified for the name). Redirects are not followed; the answer is read up to
a small cap within the timeout."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from standardwebhooks.webhooks import Webhook

from annotation.core.addresses import AddressRefused, resolve_checked

# Of the receiver's answer, what the delivery log keeps.
EXCERPT_CHARS = 1000
_READ_MAX_BYTES = 16 * 1024
_USER_AGENT = "Arbiter webhooks"


class TargetRefused(Exception):
    """The URL may not be sent to (its scheme, its host's addresses); the message says why."""


@dataclass(frozen=True)
class Answer:
    """What one attempt got: the status code (None when no answer came), the start of the
    body or the reason there was none, and how long it took."""

    status_code: int | None
    excerpt: str
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def target_check(url: str) -> tuple[httpx.URL, str]:
    """The parsed URL and the address to connect to; raises ``TargetRefused``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("only http and https URLs are allowed")
    if parts.username or parts.password:
        raise TargetRefused("a URL with a user name or password is not allowed")
    if not parts.hostname:
        raise TargetRefused("the URL has no host")
    try:
        parsed = httpx.URL(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except (httpx.InvalidURL, ValueError) as exc:
        raise TargetRefused(f"not a valid URL: {exc}") from None
    allow = settings.ARBITER_WEBHOOK_ALLOW_PRIVATE
    try:
        address = resolve_checked(parts.hostname, port, allow_private=allow)[0]
    except AddressRefused as exc:
        raise TargetRefused(str(exc)) from None
    return parsed, address


def signed_headers(*, secret: str, msg_id: str, body: str, at: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: the event's id, this attempt's time, and
    the signature of both with the body."""
    signature = Webhook(secret).sign(msg_id=msg_id, timestamp=at, data=body)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


def webhook_post(*, url: str, body: str, headers: dict[str, str]) -> Answer:
    """POSTs ``body`` to ``url`` as described above; never raises for the receiver's faults."""
    started = time.monotonic()
    try:
        excerpt, status_code = _post(url, body, headers)
    except TargetRefused as exc:
        excerpt, status_code = f"refused: {exc}", None
    except httpx.TimeoutException:
        excerpt = f"no answer within {settings.ARBITER_WEBHOOK_TIMEOUT_S} s"
        status_code = None
    except httpx.HTTPError as exc:
        excerpt, status_code = f"{type(exc).__name__}: {exc}", None
    duration_ms = int((time.monotonic() - started) * 1000)
    return Answer(status_code, excerpt[:EXCERPT_CHARS], duration_ms)


def _post(url: str, body: str, headers: dict[str, str]) -> tuple[str, int]:
    parsed, address = target_check(url)
    timeout = settings.ARBITER_WEBHOOK_TIMEOUT_S
    deadline = time.monotonic() + timeout
    request_headers = {
        **headers,
        "Host": parsed.netloc.decode("ascii"),
        "Content-Type": "application/json",
        "User-Agent": _USER_AGENT,
    }
    extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
    # trust_env=False: a proxy from the environment would connect on our behalf, unchecked.
    with httpx.Client(trust_env=False, follow_redirects=False, timeout=timeout) as client:
        request = client.build_request(
            "POST",
            parsed.copy_with(host=address),
            content=body.encode(),
            headers=request_headers,
            extensions=extensions,
        )
        answer = client.send(request, stream=True)
        try:
            read = bytearray()
            for chunk in answer.iter_raw():
                read += chunk
                if len(read) >= _READ_MAX_BYTES or time.monotonic() > deadline:
                    break
            return read.decode("utf-8", "replace"), answer.status_code
        finally:
            answer.close()
