"""Structured logs: one JSON object a line, and one line per HTTP request."""

from __future__ import annotations

import json
import logging
import time
import uuid

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

request_logger = logging.getLogger("arbiter.request")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {
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


class RequestLogMiddleware:
    """Logs method, path, status, duration and user id; never bodies or headers."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = uuid.uuid4().hex[:16]
        started = time.perf_counter()
        response = self.get_response(request)
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
