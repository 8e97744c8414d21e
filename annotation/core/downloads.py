"""Streamed file downloads with HTTP range requests (RFC 9110, section 14), for release
archives and files and for the media view alike: one implementation of ``Range``, ``If-Range``,
``ETag`` and HEAD.

Django's ``FileResponse`` streams but ignores ``Range``; a client resuming a large archive, or a
browser seeking in a long video, needs ``206 Partial Content``. One range per request: a
multi-range request is answered with the whole file, as the RFC lets a server do. The file is
read in chunks from the range's start and never held in memory; a HEAD opens nothing. In
production the bytes can be left to the web server instead (``handed_off_response``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.cache import get_conditional_response
from django.utils.http import content_disposition_header

CHUNK_BYTES = 256 * 1024

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


class _FileChunks:
    """The bytes of one range of an open file, chunk by chunk; the response closes the file
    through ``close()``, also when the body was never read."""

    def __init__(self, file: BinaryIO, start: int, length: int) -> None:
        self.file = file
        self.start = start
        self.length = length

    def __iter__(self) -> Iterator[bytes]:
        self.file.seek(self.start)
        left = self.length
        while left > 0:
            chunk = self.file.read(min(CHUNK_BYTES, left))
            if not chunk:
                return  # the file shrank under us; the client sees a short body
            left -= len(chunk)
            yield chunk

    def close(self) -> None:
        self.file.close()


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
    etag = quoted_etag(etag_value) if etag_value else None
    not_modified = _not_modified(request, etag)
    if not_modified is not None:
        return not_modified
    # Closed by the response through _FileChunks.close(), or below when nothing is sent.
    file = None if request.method == "HEAD" else open(path, "rb")  # noqa: SIM115
    size = os.fstat(file.fileno()).st_size if file is not None else path.stat().st_size
    try:
        byte_range = None
        header = request.headers.get("Range")
        if header is not None and _if_range_holds(request, etag):
            byte_range = parse_range(header, size)
    except Unsatisfiable:
        if file is not None:
            file.close()
        refused = HttpResponse(status=416)
        refused["Content-Range"] = f"bytes */{size}"
        refused["Accept-Ranges"] = "bytes"
        return refused
    start, length = (0, size) if byte_range is None else (byte_range.start, byte_range.length)
    status = 200 if byte_range is None else 206
    response: HttpResponseBase
    if file is None:
        response = HttpResponse(status=status, content_type=content_type)
    else:
        response = StreamingHttpResponse(
            _FileChunks(file, start, length), status=status, content_type=content_type
        )
    response["Content-Length"] = str(length)
    if byte_range is not None:
        response["Content-Range"] = f"bytes {byte_range.start}-{byte_range.end}/{size}"
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
