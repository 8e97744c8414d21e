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

A process makes the functions it needs the first time it runs each statement: at once when
no transaction is open, else after the caller's transaction commits (``on_commit``; till then
the statement runs as it is). Either way in a transaction of its own on the same connection,
never while holding a server connection for another one (behind the pooler, waiting for a
second server connection while holding one can wait forever), and never inside a request's
transaction (whose rollback would take the function with it). A transaction-level advisory
lock keeps two processes starting together from racing; the other versions of the same
statement's function are dropped there, so the first process of a new release replaces the
previous release's. The database role needs ``CREATE`` on the schema; without it the
statements run unplanned, with a warning (docs/database.md, "Behind PgBouncer")."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import partial

import psycopg
from django.db import DatabaseError, connection, transaction

logger = logging.getLogger(__name__)

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


# Per statement (its name and PostgreSQL's text): its function, or None where it could not be
# made (the statement then runs as it is).
_KNOWN: dict[tuple[str, str], StatementFunction | None] = {}
# Statements whose function was dropped under this process: made again, it drops no other
# version (the one dropping it was a newer release's, which must not be dropped in turn).
_DROPPED_UNDER_US: set[tuple[str, str]] = set()


def function_name(name: str, text: str, types: list[str]) -> str:
    """``name`` and the first 8 hex digits of the SHA-256 of ``text`` (PostgreSQL's text) and
    its parameter and result ``types``: a migration that changes a column's type changes it."""
    digest = hashlib.sha256("\n".join([text, *types]).encode()).hexdigest()
    return f"{name}_{digest[:8]}"


def statement_function(name: str, text: str) -> StatementFunction | None:
    """The function that runs ``text`` (``$1, $2...`` parameters), or None while it is not
    made yet (inside a transaction: made after it commits) or cannot be."""
    key = (name, text)
    if key in _KNOWN:
        return _KNOWN[key]
    if connection.in_atomic_block:
        transaction.on_commit(partial(_make, name, text))
        return None
    _make(name, text)
    return _KNOWN[key]


def forget_if_missing(error: Exception, name: str, text: str) -> None:
    """Forgets the function when ``error`` says it does not exist (the database was
    recreated, or another release dropped it), so that the next call makes it again."""
    if getattr(error.__cause__, "sqlstate", None) == _UNDEFINED_FUNCTION:
        _KNOWN.pop((name, text), None)
        _DROPPED_UNDER_US.add((name, text))


def _make(name: str, text: str) -> None:
    """Makes the function for ``text`` if this process has not, in a transaction of its own;
    one that cannot be made is remembered as such, with a warning."""
    key = (name, text)
    if key in _KNOWN:
        return
    try:
        _KNOWN[key] = _created(name, text, drop_stale=key not in _DROPPED_UNDER_US)
    except DatabaseError as error:
        logger.warning(
            "The statement %s runs unplanned: its function could not be made (%s); the "
            "database role needs CREATE on its schema (docs/database.md)",
            name,
            str(error).strip(),
        )
        _KNOWN[key] = None


def _created(name: str, text: str, *, drop_stale: bool = True) -> StatementFunction:
    """The function for ``text``, created (with the other versions of ``name``'s dropped,
    where ``drop_stale``) if the database does not have it, committed before it returns."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [_LOCK_KEY])
        found = _described(cursor, name, text)
        if not found.exists:
            cursor.execute(found.create_sql(text))
            for stale in found.stale if drop_stale else []:
                cursor.execute(f"DROP FUNCTION IF EXISTS {stale}")
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


def _types(name: str, text: str) -> tuple[list[int], list[int]]:
    """The type oids of ``text``'s parameters and result columns, as PostgreSQL gives them
    when it prepares the statement (the unnamed one, at the protocol level: nothing is left
    on the server connection)."""
    pgconn = connection.connection.pgconn
    for answer in (pgconn.prepare(b"", text.encode()), pgconn.describe_prepared(b"")):
        if answer.status != psycopg.pq.ExecStatus.COMMAND_OK:
            message = (answer.error_message or b"").decode(errors="replace").strip()
            raise DatabaseError(f"{name}: {message}")
    return (
        [answer.param_type(at) for at in range(answer.nparams)],
        [answer.ftype(at) for at in range(answer.nfields)],
    )


def _described(cursor, name: str, text: str) -> _Described:
    """``text``'s parameter and result types, as PostgreSQL prepares it, and whether its
    function exists; the other versions of ``name``'s function."""
    if _QUOTE in text:
        raise ValueError(f"{name}: the statement contains {_QUOTE}")
    oids, result_oids = _types(name, text)
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
