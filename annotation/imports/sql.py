"""Every raw SQL statement of an import, one function each, returning ``(sql, params)``.

Table and column names come from the models' metadata and are always quoted, so
tests/annotation/imports/test_import_sql.py can check that each name a statement uses exists in the
schema.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection, models

from annotation.models import ImportJob

Sql = tuple[str, list]


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _table(model: type[models.Model]) -> str:
    return _quote(model._meta.db_table)


def _field(model: type[models.Model], field_name: str) -> models.Field:
    """The field ``field_name`` of ``model`` that has a column in its table."""
    field = model._meta.get_field(field_name)
    if not isinstance(field, models.Field):
        raise ValueError(f"{model._meta.label}.{field_name}: not a column of its table")
    return field


def _column(model: type[models.Model], field_name: str) -> str:
    return _quote(_field(model, field_name).column)


def project_lock(*, namespace: int, key: int) -> Sql:
    """Waits for, then holds until the transaction ends, the lock of one project's imports."""
    return "SELECT pg_advisory_xact_lock(%s, %s)", [namespace, key]


def project_lock_try(*, namespace: int, key: int) -> Sql:
    """Takes the lock of one project's imports until the transaction ends if it is free,
    without waiting; returns one row, true when it was taken."""
    return "SELECT pg_try_advisory_xact_lock(%s, %s)", [namespace, key]


def lock_kept_while_idle() -> Sql:
    """No ``idle_in_transaction_session_timeout`` (a role's or the server's) ends the
    transaction that holds the lock while the import works elsewhere."""
    return "SET LOCAL idle_in_transaction_session_timeout = 0", []


def constraints_immediate() -> Sql:
    """Foreign keys checked as each statement runs, not all at once in the commit."""
    return "SET CONSTRAINTS ALL IMMEDIATE", []


def constraints_deferred() -> Sql:
    """Back to Django's deferred checks."""
    return "SET CONSTRAINTS ALL DEFERRED", []


def sequential_scans(*, allowed: bool) -> Sql:
    """Forbids (or allows again) sequential scans for the rest of the transaction."""
    if allowed:
        return "SET LOCAL enable_seqscan TO DEFAULT", []
    return "SET LOCAL enable_seqscan = off", []


def rows_matching(
    model: type[models.Model],
    column: str,
    values: list,
    *,
    project_id: int | None = None,
    fields: tuple[str, ...] = (),
) -> Sql:
    """``column`` and ``fields`` of the rows of ``model`` (in ``project_id``, if given) whose
    ``column`` is one of ``values``. One array parameter instead of thousands of placeholders,
    and one index probe per value (the column is unique within the scope): never a scan of the
    table, whose statistics may predate the rows this import is adding."""
    key = _field(model, column)
    names = ", ".join(_column(model, name) for name in (column, *fields))
    scope = f"{_column(model, 'project')} = %s AND " if project_id is not None else ""
    sql = (
        f"SELECT found.* FROM unnest(%s::{key.db_type(connection)}[]) AS wanted(value) "
        f"CROSS JOIN LATERAL (SELECT {names} FROM {_table(model)} "
        f"WHERE {scope}{_quote(key.column)} = wanted.value LIMIT 1) AS found"
    )
    return sql, [values] if project_id is None else [values, project_id]


def statistics_refresh(model: type[models.Model], fields: list[str]) -> Sql:
    """ANALYZE of some columns, seeing this transaction's rows; skipped while another
    transaction holds the table's lock for it."""
    names = ", ".join(_column(model, name) for name in fields)
    return f"ANALYZE (SKIP_LOCKED) {_table(model)} ({names})", []


def serial_ids(model: type[models.Model], count: int) -> Sql:
    """``count`` new values of the primary key's sequence."""
    return (
        "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
        [model._meta.db_table, model._meta.pk.column, count],
    )


def rows_copy(model: type[models.Model], fields: list[str]) -> Sql:
    """COPY into ``fields`` (attribute names) of ``model``'s table; rows follow on STDIN."""
    names = ", ".join(_column(model, name) for name in fields)
    return f"COPY {_table(model)} ({names}) FROM STDIN", []


def import_job_progress(*, job_id: int, bytes_done: int, lines_done: int, at: datetime) -> Sql:
    """Records how far a running import got, and when."""
    return (
        f"UPDATE {_table(ImportJob)} SET {_column(ImportJob, 'bytes_done')} = %s, "
        f"{_column(ImportJob, 'lines_done')} = %s, {_column(ImportJob, 'progress_at')} = %s "
        f"WHERE {_column(ImportJob, 'id')} = %s AND {_column(ImportJob, 'status')} = %s",
        [bytes_done, lines_done, at, job_id, ImportJob.Status.RUNNING],
    )
