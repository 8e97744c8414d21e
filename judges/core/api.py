"""OpenAPI pieces the judges' endpoints share."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiResponse,
)

BROKER_DOWN_RESPONSE = OpenApiResponse(
    description='The task broker is down: {"detail": "..."} says what became of the run.'
)
