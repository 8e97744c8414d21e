"""Structured logs: one JSON object a line, and one line per HTTP request. Each request has
an id (``X-Request-ID``: the client's or proxy's when well-formed, else a new one), returned
on the response and put on every log line written while it runs (``RequestIdFilter``), and
into the headers of the Celery tasks it sends, whose log lines carry it too
(``config/celery.py``; docs/operations.md, "Logs")."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from typing import Any

from django.core.signals import request_finished, request_started

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

request_logger = logging.getLogger("arbiter.request")

REQUEST_ID_HEADER = "X-Request-ID"
# A proxy's or client's id is kept when it is this; anything else is replaced, so a log line
# never carries what a client chose to put in it.
WELL_FORMED_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{7,127}")
# The id of the request (or the task sent by one) this thread or task is working for.
current_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "arbiter_request_id", default=None
)


def logging_config(level: str) -> dict[str, Any]:
    """Django's ``LOGGING``: every line through the JSON formatter, the request id on each,
    the root at ``level`` (``ARBITER_LOG_LEVEL``)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "config.logging.JsonFormatter"}},
        "filters": {
            "no_request_lines": {"()": "config.logging.SkipServerRequestLines"},
            "request_id": {"()": "config.logging.RequestIdFilter"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.request": {"level": "ERROR"},
            # runserver (make demo): one JSON line per request, from RequestLogMiddleware.
            "django.server": {
                "level": "WARNING",
                "filters": ["no_request_lines"],
                "propagate": True,
            },
            "axes": {"level": "WARNING"},
            # One line per judge call is noise; judge runs record latency and errors themselves.
            "httpx": {"level": "WARNING"},
            "httpcore": {"level": "WARNING"},
            # Closing a connection the server already dropped is logged as a warning by psycopg;
            # the error that matters reaches the caller (and the command line prints it once).
            "psycopg": {"level": "ERROR"},
        },
    }


def request_id_from(given: str | None) -> str:
    """``given`` when well-formed (8 to 128 letters, digits and ``._:-``), else a new id."""
    if given and WELL_FORMED_ID.fullmatch(given):
        return given
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record written while it is set."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = current_request_id.get()
        if request_id is not None and not hasattr(record, "request_id"):
            record.request_id = request_id
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[key] = (
                    value
                    if value is None or isinstance(value, str | int | float | bool)
                    else str(value)
                )
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


class SkipServerRequestLines(logging.Filter):
    """Drops the development server's own line per request (``django.server`` records carry
    the response's ``status_code``): ``RequestLogMiddleware`` has logged the request as JSON.
    Its other messages, such as errors, go through as JSON."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not hasattr(record, "status_code")


def _request_began(sender, environ=None, **kwargs) -> None:
    current_request_id.set(request_id_from((environ or {}).get("HTTP_X_REQUEST_ID")))


def _request_ended(sender, **kwargs) -> None:
    current_request_id.set(None)


class RequestLogMiddleware:
    """Logs method, path, status, duration and user id; never bodies or headers. Sets the
    request's id for everything it logs and sends, and returns it on the response."""

    def __init__(self, get_response):
        self.get_response = get_response
        # From the moment Django takes the request to the moment it is done with it: the
        # lines Django writes after the middleware returns (a 4xx or 5xx) carry the id too.
        request_started.connect(_request_began, dispatch_uid="arbiter-request-id")
        request_finished.connect(_request_ended, dispatch_uid="arbiter-request-id")

    def __call__(self, request):
        request.request_id = current_request_id.get() or request_id_from(
            request.headers.get(REQUEST_ID_HEADER)
        )
        started = time.perf_counter()
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request.request_id
        user = getattr(request, "user", None)
        request_logger.info(
            "request",
            extra={
                "request_id": request.request_id,
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "user_id": user.pk if user is not None and user.is_authenticated else None,
            },
        )
        return response
