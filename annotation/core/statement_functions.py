"""The hot path's statements kept as PL/pgSQL functions, for a connection on which SQL
``PREPARE`` cannot be used: behind PgBouncer in transaction mode, a client's next transaction
may run on another server connection, so a statement prepared on one is unknown on the next.

PostgreSQL caches the plan of each statement in a PL/pgSQL function once per server backend
(the same plan cache ``PREPARE`` uses: custom plans for the first five runs, then the
generic one when it is no dearer, as ``plan_cache_mode`` says), and a function lives in the
catalog, not in a session: any server connection the pooler hands out plans the statement once,
not on every call. Each function's body is exactly the statement (``RETURN QUERY``), its name
the statement's plus a hash of its text (``arbiter_take_1a2b3c4d``), its parameter and result
types PostgreSQL's own, read by preparing the statement once and describing it.

A process creates the functions it needs the first time it runs each statement, on a
connection of its own in a transaction of its own (so a caller's rollback cannot take the
function with it), under a transaction-level advisory lock (so two processes starting at once
do not race), and drops the other versions of the same statement there: the first process of
a new release replaces the previous release's functions. The database role needs ``CREATE``
on the schema (docs/database.md, "Behind PgBouncer")."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from django.db import connection

_LOCK_KEY = "arbiter statement functions"
# The function's body: dollar-quoted with a tag no statement contains.
_QUOTE = "$arbiter_statement$"
_UNDEFINED_FUNCTION = "42883"


@dataclass(frozen=True)
class StatementFunction:
    """A statement's function: its name, and the call that runs it with ``%s`` parameters,
    each cast to the type PostgreSQL gave it."""

    name: str
    call: str


_KNOWN: dict[tuple[str, str], StatementFunction] = {}
_CREATING = threading.Lock()


def function_name(name: str, text: str, types: list[str]) -> str:
    """``name`` and the first 8 hex digits of the SHA-256 of ``text`` (PostgreSQL's text) and
    its parameter and result ``types``: a migration that changes a column's type changes it."""
    digest = hashlib.sha256("\n".join([text, *types]).encode()).hexdigest()
    return f"{name}_{digest[:8]}"


def statement_function(name: str, text: str) -> StatementFunction:
    """The function that runs ``text`` (``$1, $2...`` parameters), created in the database if
    this process has not seen it there yet."""
    known = _KNOWN.get((name, text))
    if known is None:
        with _CREATING:
            known = _KNOWN.get((name, text)) or _created(name, text)
            _KNOWN[(name, text)] = known
    return known


def forget_if_missing(error: Exception, name: str, text: str) -> None:
    """Forgets the function when ``error`` says it does not exist (the database was
    recreated, or another release dropped it), so that the next call creates it again."""
    if getattr(error.__cause__, "sqlstate", None) == _UNDEFINED_FUNCTION:
        _KNOWN.pop((name, text), None)


def _created(name: str, text: str) -> StatementFunction:
    """The function for ``text``, created (with the other versions of ``name`` dropped) if
    the database does not have it, on a connection of its own, committed before it returns."""
    own = connection.copy()
    try:
        with own.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [_LOCK_KEY])
            found = _described(own, cursor, name, text)
            if not found.exists:
                cursor.execute(found.create_sql(text))
                for stale in found.stale:
                    cursor.execute(f"DROP FUNCTION IF EXISTS {stale}")
            cursor.execute("COMMIT")
    finally:
        own.close()
    return found.function


@dataclass(frozen=True)
class _Described:
    function: StatementFunction
    parameters: list[str]
    results: list[str]
    exists: bool
    stale: list[str]

    def create_sql(self, text: str) -> str:
        columns = ", ".join(f"c{at} {kind}" for at, kind in enumerate(self.results, 1))
        # The result columns are named c1, c2...; a statement refers to its own tables'
        # columns, never to the function's output names.
        return (
            f"CREATE OR REPLACE FUNCTION {self.function.name}({', '.join(self.parameters)}) "
            f"RETURNS TABLE ({columns}) LANGUAGE plpgsql AS {_QUOTE}\n"
            f"#variable_conflict use_column\nBEGIN\nRETURN QUERY {text};\nEND\n{_QUOTE}"
        )


def _described(own, cursor, name: str, text: str) -> _Described:
    """``text``'s parameter and result types, as PostgreSQL prepares it, and whether its
    function exists; the other versions of ``name``'s function."""
    if _QUOTE in text:
        raise ValueError(f"{name}: the statement contains {_QUOTE}")
    cursor.execute(f"PREPARE arbiter_describe AS {text}")
    described = own.connection.pgconn.describe_prepared(b"arbiter_describe")
    cursor.execute("DEALLOCATE arbiter_describe")
    oids = [described.param_type(at) for at in range(described.nparams)]
    result_oids = [described.ftype(at) for at in range(described.nfields)]
    if not result_oids:
        raise ValueError(f"{name}: a statement kept as a function returns rows (RETURNING)")
    cursor.execute(
        "SELECT array(SELECT format_type(oid, NULL) FROM unnest(%s::oid[]) WITH ORDINALITY"
        " AS t(oid, at) ORDER BY at)",
        [oids + result_oids],
    )
    (types,) = cursor.fetchone()
    parameters, results = types[: len(oids)], types[len(oids) :]
    wanted = function_name(name, text, types)
    cursor.execute(
        "SELECT p.proname, p.oid::regprocedure::text FROM pg_proc p"
        " WHERE p.pronamespace = current_schema()::regnamespace AND p.proname ~ %s",
        [f"^{name}_[0-9a-f]{{8}}$"],
    )
    versions = cursor.fetchall()
    call = ", ".join(f"%s::{kind}" for kind in parameters)
    return _Described(
        function=StatementFunction(wanted, f"SELECT * FROM {wanted}({call})"),
        parameters=parameters,
        results=results,
        exists=any(proname == wanted for proname, _ in versions),
        stale=[signature for proname, signature in versions if proname != wanted],
    )
