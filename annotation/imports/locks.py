"""The lock that runs a project's imports one at a time (a PostgreSQL advisory lock keyed by
the project, held by a transaction): tried without waiting by a worker's import job, on a
connection of its own (``project_import_lock``), or
waited for inside the import's own transaction (``lock_project``), with the constraint checks
an import's batches need."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connection, connections

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
    for another's.

    The lock is taken before the job's attempt is counted and committed, so outside the
    import's transaction: on a database connection of its own, in a transaction it keeps
    open until the block ends (a transaction-level lock, ``pg_try_advisory_xact_lock``).
    PgBouncer in transaction mode keeps a transaction on one server connection, so the lock
    is the same with the pooler and without (a session-level lock would land on whichever
    server connection the statement got, and stay there after it); it is given back on every
    way out of the block, and a killed worker's goes with its connection, at once
    (docs/operations.md, "The import lock"). The open transaction holds no snapshot and no
    row: it keeps nothing from vacuum."""
    holder = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute(*sql.lock_kept_while_idle())
            cursor.execute(*sql.project_lock_try(**_lock_key(project)))
            (taken,) = cursor.fetchone()
        if not taken:
            raise ProjectBusy(f"Another import into {project.slug} is running.")
        yield
    finally:
        # A lost connection took the lock with its transaction.
        with contextlib.suppress(*DATABASE_ERRORS):
            holder.rollback()
        with contextlib.suppress(*DATABASE_ERRORS):
            holder.close()


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
