"""Streamed file downloads with HTTP range requests (RFC 9110, section 14), for release
archives and files and for the media view alike: one implementation of ``Range``, ``If-Range``,
``ETag`` and HEAD.

Django's ``FileResponse`` streams but ignores ``Range``; a client resuming a large archive, or a
browser seeking in a long video, needs ``206 Partial Content``. One range per request: a
multi-range request is answered with the whole file, as the RFC lets a server do. The file is
read in chunks from the range's start and never held in memory, from disk or, for a file in
storage, from the bucket by one ranged ``GetObject`` (``ranged_stored_response``); a HEAD
opens nothing. In production the bytes can be left to the web server instead
(``handed_off_response``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.cache import get_conditional_response
from django.utils.http import content_disposition_header

from annotation.core import storage

_RANGE = re.compile(r"bytes=(\d*)-(\d*)", re.IGNORECASE)
# Positions of more digits than this lie past the end of any file; Python refuses to read an
# int of over 4,300 digits, so they are never read as numbers.
_MAX_POSITION_DIGITS = 18


@dataclass(frozen=True)
class ByteRange:
    """Bytes ``start`` to ``end`` of a file, both included (as ``Content-Range`` counts)."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1


class Unsatisfiable(Exception):
    """The range lies wholly past the end of the file (answered 416)."""


def _position(digits: str) -> int:
    """A byte position from the header; one too long for any file counts as 10**18."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_POSITION_DIGITS else 10**_MAX_POSITION_DIGITS


def parse_range(header: str, size: int) -> ByteRange | None:
    """The single range a ``Range`` header asks of a file of ``size`` bytes, or None when the
    header is to be ignored (malformed, another unit, several ranges): then the whole file is
    sent. Raises ``Unsatisfiable`` when the range starts at or past the end."""
    match = _RANGE.fullmatch(header.strip().replace(" ", ""))
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # bytes=-n: the last n bytes
        suffix = _position(last)
        if suffix == 0 or size == 0:
            raise Unsatisfiable
        return ByteRange(max(size - suffix, 0), size - 1)
    start = _position(first)
    if last and _position(last) < start:
        return None  # "invalid", so ignored (RFC 9110, 14.1.1)
    if start >= size:
        raise Unsatisfiable
    return ByteRange(start, min(_position(last), size - 1) if last else size - 1)


def quoted_etag(value: str) -> str:
    """A strong entity tag for an opaque value such as a sha256."""
    return f'"{value}"'


def _if_range_holds(request: HttpRequest, etag: str | None) -> bool:
    """Whether ``If-Range`` (when sent) still names this file, so the range may be served.
    Only a strong tag equal to ours holds; a date or another tag means "send it all"."""
    condition = request.headers.get("If-Range")
    if condition is None:
        return True
    return etag is not None and condition.strip() == etag


def _not_modified(request: HttpRequest, etag: str | None) -> HttpResponseBase | None:
    """304 (or 412 for a failed ``If-Match``) when the request's preconditions say so, with
    the ETag the client holds; None when the body is to be sent."""
    if etag is None:
        return None
    answer = get_conditional_response(request, etag=etag)
    if answer is not None:
        answer["ETag"] = etag
    return answer


def ranged_file_response(
    request: HttpRequest,
    path: Path,
    *,
    content_type: str,
    filename: str | None = None,
    etag_value: str | None = None,
) -> HttpResponseBase:
    """``path`` streamed: 200 with the whole file, 206 with the one range asked for, or 416
    when that range is past the end; a HEAD gets the same headers without opening the file.
    ``filename`` makes it a download of that name (the caller sets ``Content-Disposition``
    without one). ``etag_value`` (the file's hash) becomes a strong ``ETag`` that ``If-Range``
    and ``If-None-Match`` are checked against. No ``Last-Modified`` is sent (a file's mtime
    would tell the media view's two sides apart by import order), so an ``If-Range`` date
    never holds and gets the whole file, as the RFC says."""

    def body(start: int, length: int) -> Iterable[bytes]:
        # Closed by the response through RangeReader.close(), also when never read.
        return storage.RangeReader(open(path, "rb"), length, start=start)

    return _ranged_response(
        request,
        size=lambda: path.stat().st_size,
        body=body,
        content_type=content_type,
        filename=filename,
        etag_value=etag_value,
    )


def ranged_stored_response(
    request: HttpRequest,
    *,
    area: str,
    name: str,
    content_type: str,
    filename: str | None = None,
    etag_value: str | None = None,
) -> HttpResponseBase:
    """``ranged_file_response`` for a file in storage (annotation/core/storage.py), with the
    same headers on either backend. On the bucket a HEAD costs one ``HeadObject`` and a GET
    one ``HeadObject`` and one ``GetObject`` of exactly the range sent, streamed as it
    arrives. ``FileNotFoundError`` when the file is not stored."""
    return _ranged_response(
        request,
        size=lambda: storage.size(area, name),
        body=lambda start, length: storage.open_range(area, name, start, start + length - 1),
        content_type=content_type,
        filename=filename,
        etag_value=etag_value,
    )


def ranged_body_response(
    request: HttpRequest,
    *,
    size: Callable[[], int],
    body: Callable[[int, int], Iterable[bytes]],
    content_type: str,
    filename: str | None = None,
    etag_value: str | None = None,
) -> HttpResponseBase:
    """``ranged_file_response`` for bytes made as they are sent: ``size()`` of them, bytes
    ``start`` to ``start + length`` given by ``body(start, length)``."""
    return _ranged_response(
        request,
        size=size,
        body=body,
        content_type=content_type,
        filename=filename,
        etag_value=etag_value,
    )


def _ranged_response(
    request: HttpRequest,
    *,
    size: Callable[[], int],
    body: Callable[[int, int], Iterable[bytes]],
    content_type: str,
    filename: str | None,
    etag_value: str | None,
) -> HttpResponseBase:
    """The answer to a GET or HEAD of a file of ``size()`` bytes whose bytes ``body(start,
    length)`` streams (called only for a GET with something to send)."""
    etag = quoted_etag(etag_value) if etag_value else None
    not_modified = _not_modified(request, etag)
    if not_modified is not None:
        return not_modified
    total = size()
    try:
        byte_range = None
        header = request.headers.get("Range")
        if header is not None and _if_range_holds(request, etag):
            byte_range = parse_range(header, total)
    except Unsatisfiable:
        refused = HttpResponse(status=416)
        refused["Content-Range"] = f"bytes */{total}"
        refused["Accept-Ranges"] = "bytes"
        return refused
    start, length = (0, total) if byte_range is None else (byte_range.start, byte_range.length)
    status = 200 if byte_range is None else 206
    response: HttpResponseBase
    if request.method == "HEAD" or length == 0:
        response = HttpResponse(status=status, content_type=content_type)
    else:
        response = StreamingHttpResponse(
            body(start, length), status=status, content_type=content_type
        )
    response["Content-Length"] = str(length)
    if byte_range is not None:
        response["Content-Range"] = f"bytes {byte_range.start}-{byte_range.end}/{total}"
    response["Accept-Ranges"] = "bytes"
    # Behind a login: a shared cache must not keep it; gzip on the way would break ranges.
    response["Cache-Control"] = "private, no-transform"
    if filename is not None:
        response["Content-Disposition"] = content_disposition_header(True, filename) or "attachment"
    if etag is not None:
        response["ETag"] = etag
    return response


HAND_OFF_MODES = ("nginx", "apache")


def handed_off_response(
    request: HttpRequest,
    *,
    root: Path,
    relative_path: str,
    mode: str,
    nginx_prefix: str,
    content_type: str,
    etag_value: str | None = None,
) -> HttpResponseBase:
    """An empty answer telling the web server to send ``root / relative_path`` itself, once
    the caller has checked permissions: ``X-Accel-Redirect`` to ``nginx_prefix`` (an
    ``internal`` location aliasing ``root``) for nginx, ``X-Sendfile`` with the absolute path
    for Apache's mod_xsendfile and lighttpd. The web server then answers ``Range`` and HEAD;
    Django opens nothing. ``If-None-Match`` is still answered here (304)."""
    if mode not in HAND_OFF_MODES:
        raise ValueError(f"No hand-off to a web server called {mode!r}")
    etag = quoted_etag(etag_value) if etag_value else None
    not_modified = _not_modified(request, etag)
    if not_modified is not None:
        return not_modified
    response = HttpResponse(content_type=content_type)
    if mode == "nginx":
        response["X-Accel-Redirect"] = nginx_prefix + quote(relative_path)
    else:
        response["X-Sendfile"] = str(Path(root) / relative_path)
    response["Accept-Ranges"] = "bytes"
    response["Cache-Control"] = "private, no-transform"
    if etag is not None:
        response["ETag"] = etag
    return response
