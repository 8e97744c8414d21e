"""Recording a job's failure when the failure may be the database itself: a PostgreSQL
restart breaks the worker's connection, the job fails on it, and the UPDATE that records the
failure would fail on the same broken connection, leaving the job to the stalled-job sweep,
which could only say its worker died (docs/operations.md, "The scheduler")."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

# What Django raises when the database connection is lost or refused.
DATABASE_ERRORS = (OperationalError, InterfaceError)


def describe_error(exc: BaseException) -> str:
    """``exc`` as a job's error message, a database error named as such."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, DATABASE_ERRORS):
        return f"The database connection failed ({text.strip()})."
    return text


def record_failure(record: Callable[[], None]) -> None:
    """Runs ``record`` (the UPDATE that marks a job failed); when the connection it runs on is
    broken, closes it and runs ``record`` once more on a new one. Inside a transaction the
    connection cannot be replaced, and the error is raised."""
    try:
        record()
    except DATABASE_ERRORS:
        if connection.in_atomic_block:
            raise
        logger.warning("database connection lost; recording a failure on a new one")
        # closed anyway on an error: Django forgets the connection and opens a new one
        with contextlib.suppress(*DATABASE_ERRORS):
            connection.close()
        record()
