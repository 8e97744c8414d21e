"""The API's refusals as exceptions, each carrying the JSON body the server answered."""

from __future__ import annotations

from typing import Any


class ArbiterError(Exception):
    """Anything the client could not do."""


class ApiError(ArbiterError):
    """The API refused a request: ``status``, the JSON ``body``, its ``detail`` and, for a 400,
    ``fields``: each field named in the body with its messages."""

    def __init__(self, status: int, body: Any, method: str, url: str):
        self.status = status
        self.body = body
        self.method = method
        self.url = url
        self.detail = body.get("detail") if isinstance(body, dict) else None
        self.fields: dict[str, list[str]] = _field_messages(body)
        super().__init__(f"{method} {url}: {status} {self._summary()}")

    def _summary(self) -> str:
        parts = [str(self.detail)] if self.detail else []
        parts += [f"{name}: {'; '.join(messages)}" for name, messages in self.fields.items()]
        return " | ".join(parts) or repr(self.body)


class BadRequest(ApiError):
    """400: a field of the request or a value a service refused (``fields`` names them)."""


class Unauthorized(ApiError):
    """401: no token, a wrong one, or one expired or revoked."""


class Forbidden(ApiError):
    """403: your role in the project does not allow this."""


class NotFound(ApiError):
    """404: no such object, or a project you are not a member of."""


class Conflict(ApiError):
    """409: conflicts with what is there (a different vote, a finished run, ...)."""


class Throttled(ApiError):
    """429 after the client's retries ran out."""


class Unavailable(ApiError):
    """503 after the client's retries ran out: a service the server needs is down."""


class JobFailed(ArbiterError):
    """A job (import, filter run, release build) ended without succeeding; ``job`` is its
    last state as the API gave it."""

    def __init__(self, kind: str, job: dict[str, Any]):
        self.job = job
        error = job.get("error") or job.get("errors") or ""
        super().__init__(f"{kind} ended {job.get('status')}: {error}")


class IntegrityError(ArbiterError):
    """A downloaded file's sha256 or size differs from what the release lists."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: Throttled,
    503: Unavailable,
}


def error_for(status: int, body: Any, method: str, url: str) -> ApiError:
    return _BY_STATUS.get(status, ApiError)(status, body, method, url)


def _field_messages(body: Any) -> dict[str, list[str]]:
    if not isinstance(body, dict):
        return {}
    found: dict[str, list[str]] = {}
    for name, value in body.items():
        if name == "detail":
            continue
        if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
            found[name] = list(value)
        elif isinstance(value, str):
            found[name] = [value]
    for error in body.get("errors") or []:  # an import's refused lines
        if isinstance(error, dict):
            where = f"line {error.get('line')}: {error.get('field') or ''}".rstrip(": ")
            found.setdefault(where, []).append(str(error.get("message")))
    return found
