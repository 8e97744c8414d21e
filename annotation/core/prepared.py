"""Server-side prepared statements for the few raw statements on the annotators' hot path.

The claim's statement (``annotation.queue.annotating``) is a handful of index lookups that
PostgreSQL runs in well under a millisecond, but planning its nested subqueries takes longer
than running them, on every claim. Prepared once per database connection, it is planned once
(PostgreSQL keeps a custom plan for the first executions and a generic one after, when that is
no dearer). Django binds parameters on the client, so the statement is prepared with
``PREPARE`` and run with ``EXECUTE``; on SQLite, and anywhere else, it simply runs.

A connection remembers the names it prepared (``_PREPARED``, keyed by the driver's connection
object, which a reconnect replaces), and a statement is prepared again on a new connection.
Behind a pooler that resets sessions (PgBouncer in transaction mode), set
``ARBITER_PREPARED_STATEMENTS=false``: the statements then run unprepared.
"""

from __future__ import annotations

import re
import weakref

from django.conf import settings
from django.db import connection

_PREPARED: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
# "%%" is a literal "%", "%s" a parameter, in the driver's format that the statements use.
_PLACEHOLDER = re.compile(r"%%|%s")


def dollar_placeholders(sql: str) -> tuple[str, int]:
    """``sql`` with its ``%s`` parameters numbered as PostgreSQL's ``$1, $2, ...`` and ``%%``
    as ``%``, and the number of parameters."""
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(replace, sql), count


def execute_prepared(cursor, name: str, sql: str, params: list) -> None:
    """Runs ``sql`` (driver placeholders) with ``params`` on ``cursor``: on PostgreSQL as the
    prepared statement ``name`` (a fixed identifier, one per statement text), preparing it
    first on a connection that has not; elsewhere as it is."""
    if connection.vendor != "postgresql" or not settings.ARBITER_PREPARED_STATEMENTS:
        cursor.execute(sql, params)
        return
    raw = connection.connection
    names = _PREPARED.setdefault(raw, set())
    if name not in names:
        text, count = dollar_placeholders(sql)
        if count != len(params):
            raise ValueError(f"{name}: {count} placeholders for {len(params)} parameters")
        cursor.execute(f"PREPARE {name} AS {text}")
        names.add(name)
    cursor.execute(f"EXECUTE {name} ({', '.join(['%s'] * len(params))})", params)
