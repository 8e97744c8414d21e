"""One HTTP session with the server: the token, retries on 429 and 503 honouring
``Retry-After`` (bounded), JSON in and out, refusals raised as ``ApiError``."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from arbiter_client.errors import error_for
from arbiter_client.files import CHUNK_BYTES

RETRY_STATUSES = frozenset({429, 503})
DEFAULT_RETRIES = 5
# The longest wait between tries, whatever Retry-After asks: a script never hangs for an hour.
MAX_RETRY_WAIT_S = 60.0
API_PREFIX = "/api/v1/"


def retry_after_seconds(value: str | None, attempt: int) -> float:
    """The wait ``Retry-After`` asks for (seconds or an HTTP date), or exponential backoff
    with jitter when it says nothing; never more than ``MAX_RETRY_WAIT_S``."""
    wait: float | None = None
    if value:
        value = value.strip()
        if value.isdigit():
            wait = float(value)
        else:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                wait = (when - datetime.now(UTC)).total_seconds()
    if wait is None:
        wait = min(2.0**attempt, MAX_RETRY_WAIT_S) * (0.5 + random.random() / 2)
    return min(max(wait, 0.0), MAX_RETRY_WAIT_S)


class Transport:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        retries: int = DEFAULT_RETRIES,
        timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        http: httpx.Client | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self._sleep = sleep
        self.http = http or httpx.Client(timeout=timeout)
        self.http.headers["Authorization"] = f"Token {token}"

    def url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        if path.startswith("/"):
            return self.base_url + path
        return self.base_url + API_PREFIX + path

    def request(
        self, method: str, path: str, *, stream: bool = False, **kwargs: Any
    ) -> httpx.Response:
        """The response to the first try the server did not answer 429 or 503 (or the last
        try's); a 4xx or 5xx is raised as an ``ApiError`` with the body. With ``stream`` the
        body is left unread: the caller reads it and closes the response."""
        url = self.url(path)
        # Files are opened afresh for each try: a retried upload sends them whole again.
        open_files: Callable[[], dict[str, tuple[str, Any]]] | None = kwargs.pop("open_files", None)
        for attempt in range(self.retries + 1):
            files = open_files() if open_files is not None else None
            try:
                sent = self.http.build_request(method, url, files=files, **kwargs)
                response = self.http.send(sent, stream=True)
            finally:
                for _, handle in (files or {}).values():
                    handle.close()
            if response.status_code not in RETRY_STATUSES or attempt == self.retries:
                break
            response.close()
            self._sleep(retry_after_seconds(response.headers.get("Retry-After"), attempt))
        if response.status_code >= 400 or not stream:
            try:
                response.read()
            finally:
                response.close()
        if response.status_code >= 400:
            raise error_for(response.status_code, _body(response), method, url)
        return response

    def download(self, path: str, destination: Path) -> None:
        """The body of a GET written to ``destination`` a chunk at a time, never held whole."""
        response = self.request("GET", path, stream=True)
        try:
            with destination.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK_BYTES):
                    out.write(chunk)
        finally:
            response.close()

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a list endpoint, page after page (``next`` links), or of a list the
        endpoint answers whole."""
        page = self.json("GET", path, params=params)
        while True:
            if isinstance(page, list):
                yield from page
                return
            yield from page["results"]
            if not page.get("next"):
                return
            page = self.json("GET", page["next"])

    def close(self) -> None:
        self.http.close()


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {"detail": response.text[:2000]}
