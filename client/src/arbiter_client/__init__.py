"""Python client for Arbiter's REST API (docs/api.md in the Arbiter repository)."""

from arbiter_client.client import Client, open_release
from arbiter_client.errors import (
    ApiError,
    ArbiterError,
    BadRequest,
    Conflict,
    Forbidden,
    IntegrityError,
    JobFailed,
    NotFound,
    Throttled,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "ApiError",
    "ArbiterError",
    "BadRequest",
    "Client",
    "Conflict",
    "Forbidden",
    "IntegrityError",
    "JobFailed",
    "NotFound",
    "Throttled",
    "Unauthorized",
    "Unavailable",
    "open_release",
]
