"""The lock that runs a project's imports one at a time (a PostgreSQL advisory lock keyed by
the project): tried without waiting by a worker's import job (``project_import_lock``), or
waited for inside the import's own transaction (``lock_project``), with the constraint checks
an import's batches need."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from annotation.core.failures import DATABASE_ERRORS
from annotation.imports import sql
from annotation.models import Project

# Namespace of the PostgreSQL advisory lock that serialises imports into one project.
_LOCK_NAMESPACE = 0x41524249


class ProjectBusy(Exception):
    """Another import into the project holds its lock; the import is to be tried later."""


def _lock_key(project: Project) -> dict[str, int]:
    return {"namespace": _LOCK_NAMESPACE, "key": project.pk % 2**31}


@contextmanager
def project_import_lock(project: Project) -> Iterator[None]:
    """Holds the lock of ``project``'s imports, or raises ``ProjectBusy`` at once when another
    import holds it: a worker never waits for a lock, and one project's imports never wait
    for another's. A session-level lock (``pg_try_advisory_lock``), because it is taken
    before the job's attempt is counted and committed, outside the import's transaction; it
    is given back on every way out of the block, and a killed worker's ends with its
    database session. Not to be entered inside a transaction that outlives the block."""
    with connection.cursor() as cursor:
        cursor.execute(*sql.project_lock_try(**_lock_key(project)))
        (taken,) = cursor.fetchone()
    if not taken:
        raise ProjectBusy(f"Another import into {project.slug} is running.")
    try:
        yield
    finally:
        # A lost connection took the lock with its session.
        with contextlib.suppress(*DATABASE_ERRORS), connection.cursor() as cursor:
            cursor.execute(*sql.project_unlock(**_lock_key(project)))


def lock_project(project: Project, *, wait: bool) -> None:
    """Imports into one project run one at a time, so "is this pair id new?" stays true
    until the batch is written: the transaction waits for the lock unless the caller holds
    it already (``wait`` false)."""
    with connection.cursor() as cursor:
        if wait:
            cursor.execute(*sql.project_lock(**_lock_key(project)))
        # Foreign keys are checked as each batch is written, while the reader thread prepares
        # the next one, instead of all at once in the commit.
        cursor.execute(*sql.constraints_immediate())


def restore_constraint_checks() -> None:
    """Back to Django's deferred checks, for a caller whose transaction goes on."""
    with connection.cursor() as cursor:
        cursor.execute(*sql.constraints_deferred())
