"""Fetching an image by URL without letting an import reach the server's own network (SSRF).

Only http(s). Every address a host name resolves to must be public; the connection goes to
the address that was checked (so a second DNS answer cannot swap in a private one), TLS still
verifies the certificate for the host name, redirects are followed by hand and checked the
same way, and the body is capped in size and in total time.
"""

from __future__ import annotations

import time
from urllib.parse import urljoin

import httpx
from django.conf import settings

from annotation.core.addresses import AddressRefused, resolve_checked

_REDIRECTS = {301, 302, 303, 307, 308}
_USER_AGENT = "Arbiter media import"


class FetchError(Exception):
    """The URL was refused or could not be fetched; the message says why."""


def resolve_public(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, refusing the host if any one of them is not public."""
    try:
        return resolve_checked(host, port, allow_private=False)
    except AddressRefused as exc:
        raise FetchError(str(exc)) from None


def fetch_image_bytes(
    url: str,
    *,
    max_bytes: int | None = None,
    timeout_s: float | None = None,
    max_redirects: int | None = None,
) -> bytes:
    """The body of ``url`` after the checks above; raises ``FetchError``."""
    max_bytes = max_bytes if max_bytes is not None else settings.ARBITER_MAX_IMAGE_BYTES
    timeout_s = timeout_s if timeout_s is not None else settings.ARBITER_FETCH_TIMEOUT_S
    if max_redirects is None:
        max_redirects = settings.ARBITER_FETCH_MAX_REDIRECTS
    deadline = time.monotonic() + timeout_s
    # trust_env=False: a proxy from the environment would connect on our behalf, unchecked.
    with httpx.Client(trust_env=False, follow_redirects=False, timeout=timeout_s) as client:
        for _hop in range(max_redirects + 1):
            location = _fetch_once(client, url, max_bytes=max_bytes, deadline=deadline)
            if isinstance(location, bytes):
                return location
            url = urljoin(url, location)
    raise FetchError(f"more than {max_redirects} redirects")


def _fetch_once(client: httpx.Client, url: str, *, max_bytes: int, deadline: float) -> bytes | str:
    """One request: the body, or the Location of a redirect."""
    if time.monotonic() > deadline:
        raise FetchError("timed out")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise FetchError(f"not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise FetchError(f"only http and https URLs are fetched, not {parsed.scheme or 'none'}")
    if parsed.userinfo:
        raise FetchError("URLs with a user name or password are not fetched")
    host = parsed.host
    if not host:
        raise FetchError("the URL has no host")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    address = resolve_public(host, port)[0]
    headers = {
        "Host": parsed.netloc.decode("ascii"),
        "User-Agent": _USER_AGENT,
        "Accept": "image/*",
        # Compressed bodies could inflate far past the size cap between two checks.
        "Accept-Encoding": "identity",
    }
    extensions = {"sni_hostname": host} if parsed.scheme == "https" else {}
    request = client.build_request(
        "GET", parsed.copy_with(host=address), headers=headers, extensions=extensions
    )
    try:
        response = client.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise FetchError(f"cannot fetch {host}: {type(exc).__name__}: {exc}") from None
    try:
        if response.status_code in _REDIRECTS:
            location = response.headers.get("location")
            if not location:
                raise FetchError(f"HTTP {response.status_code} without a Location header")
            return location
        if response.status_code != 200:
            raise FetchError(f"HTTP {response.status_code} from {host}")
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            raise FetchError("compressed (Content-Encoding) responses are not accepted")
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise FetchError(f"the image is larger than {max_bytes} bytes")
        body = bytearray()
        for chunk in response.iter_raw():
            body += chunk
            if len(body) > max_bytes:
                raise FetchError(f"the image is larger than {max_bytes} bytes")
            if time.monotonic() > deadline:
                raise FetchError("timed out")
        return bytes(body)
    except httpx.HTTPError as exc:
        raise FetchError(f"cannot fetch {host}: {type(exc).__name__}: {exc}") from None
    finally:
        response.close()
