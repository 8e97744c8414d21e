"""Server-side prepared statements for the few raw statements on the annotators' hot path.

The claim's statement (``annotation.queue.services.claim``) is a handful of index lookups that
PostgreSQL runs in well under a millisecond, but planning its nested subqueries takes longer
than running them, on every claim. Prepared once per database connection, it is planned once
(PostgreSQL keeps a custom plan for the first executions and a generic one after, when that is
no dearer). Django binds parameters on the client, so the statement is prepared with
``PREPARE`` and run with ``EXECUTE``.

A connection remembers the names it prepared (``_PREPARED``, keyed by the driver's connection
object, which a reconnect replaces), and a statement is prepared again on a new connection.
Behind PgBouncer in transaction mode (``ARBITER_DB_POOLER=transaction``), where a statement
prepared on one server connection is unknown to the next, each statement is kept instead as a
PL/pgSQL function whose plan PostgreSQL caches per server connection
(``annotation.core.statement_functions``); ``ARBITER_STATEMENT_PLANS`` chooses
(docs/database.md, "Behind PgBouncer").
"""

from __future__ import annotations

import inspect
import re
import weakref
from collections.abc import Iterable

from django.conf import settings
from django.db import ProgrammingError, connection
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils.functional import cached_property

from annotation.core.statement_functions import forget_if_missing, statement_function

_PREPARED: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
# "%%" is a literal "%", "%s" a parameter, in the driver's format that the statements use.
_PLACEHOLDER = re.compile(r"%%|%s")
# "%(name)s" a named parameter (pyformat), which may stand in several places.
_NAMED = re.compile(r"%%|%\((\w+)\)s")
# Per statement text with named parameters: PostgreSQL's text and the names in $1, $2... order.
_NAMED_TEXTS: dict[str, tuple[str, tuple[str, ...]]] = {}
_POSITIONAL_TEXTS: dict[str, tuple[str, int]] = {}


def dollar_placeholders(sql: str) -> tuple[str, int]:
    """``sql`` with its ``%s`` parameters numbered as PostgreSQL's ``$1, $2, ...`` and ``%%``
    as ``%``, and the number of parameters."""
    if (known := _POSITIONAL_TEXTS.get(sql)) is not None:
        return known
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        if match.group() == "%%":
            return "%"
        count += 1
        return f"${count}"

    text = _PLACEHOLDER.sub(replace, sql)
    _POSITIONAL_TEXTS[sql] = text, count
    return text, count


def named_dollar_placeholders(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``%(name)s`` parameters as PostgreSQL's ``$1, $2, ...``, one number
    per name however often it stands, and ``%%`` as ``%``; and the names in number order. The
    claim's statement repeats the annotator's conditions six times: named, its values are bound
    (and quoted by the driver) once each, twelve in all, not 51."""
    if (known := _NAMED_TEXTS.get(sql)) is not None:
        return known
    if "%s" in _NAMED.sub("", sql):
        raise ValueError("a statement with named parameters has a positional one")
    names: list[str] = []

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    known = _NAMED.sub(replace, sql), tuple(names)
    _NAMED_TEXTS[sql] = known
    return known


def positional(sql: str, params: dict) -> tuple[str, list]:
    """``sql``'s named parameters as ``%s`` and their values in order, for an ORM
    expression (``RawSQL``) that takes positional ones."""
    values: list = []

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name is None:
            return "%%"
        values.append(params[name])
        return "%s"

    return _NAMED.sub(replace, sql), values


def execute_prepared(cursor, name: str, sql: str, params: list | dict) -> None:
    """Runs ``sql`` (driver placeholders: ``%s`` with a list, ``%(name)s`` with a dict) with
    ``params`` on ``cursor`` planned once, as ``ARBITER_STATEMENT_PLANS`` says: the prepared
    statement ``name`` (a fixed identifier, one per statement text), prepared first on a
    connection that has not; the function kept for it (``functions``); or as it is
    (``none``)."""
    plans = settings.ARBITER_STATEMENT_PLANS
    if plans == "none":
        cursor.execute(sql, params)
        return
    values: list
    if isinstance(params, dict):
        text, names = named_dollar_placeholders(sql)
        values = [params[key] for key in names]
    else:
        values = params
        text, count = dollar_placeholders(sql)
        if count != len(params):
            raise ValueError(f"{name}: {count} placeholders for {len(params)} parameters")
    if plans == "functions":
        if not _execute_function(cursor, name, text, values):
            cursor.execute(sql, params)  # till its function is made
        return
    prepared = _PREPARED.setdefault(connection.connection, set())
    if name not in prepared:
        cursor.execute(f"PREPARE {name} AS {text}")
        prepared.add(name)
    cursor.execute(f"EXECUTE {name} ({', '.join(['%s'] * len(values))})", values)


def _execute_function(cursor, name: str, text: str, values: list) -> bool:
    """Runs ``text`` by its function; False (nothing run) while it is not made yet."""
    function = statement_function(name, text)
    if function is None:
        return False
    try:
        cursor.execute(function.call, values)
    except ProgrammingError as error:
        forget_if_missing(error, name, text)
        raise
    return True


class ModelColumns:
    """A model's concrete columns in a hand-written statement, and its instances back from
    the rows: ``select_list()`` names them (``t."id", t."name", ...``) and ``load(row, at)``
    builds the instance from ``row[at:]`` with the converters Django's own compiler would
    apply (JSON decoded), marked as loaded from the database. For the
    few statements on the annotators' hot path that the ORM would compile on every request."""

    def __init__(self, model, alias: str):
        self.model = model
        self.alias = alias
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self.width = len(self.fields)
        self._converters: list | None = None

    def select_list(self) -> str:
        return ", ".join(f'{self.alias}."{field.column}"' for field in self.fields)

    def _converters_for(self) -> list:
        """(index, column, converters) for each column that has converters."""
        converters = self._converters
        if converters is None:
            converters = []
            for index, field in enumerate(self.fields):
                column = field.get_col(self.alias)
                found = connection.ops.get_db_converters(column) + column.get_db_converters(
                    connection
                )
                if found:
                    converters.append((index, column, found))
            self._converters = converters
        return converters

    def load(self, row, at: int = 0):
        values = list(row[at : at + self.width])
        for index, column, found in self._converters_for():
            for convert in found:
                values[index] = convert(values[index], column, connection)
        if not self._plain or pre_init.receivers or post_init.receivers:
            return self.model.from_db(connection.alias, self.attnames, values)
        # What ``from_db`` builds, without ``Model.__init__``'s per-field work (every
        # concrete field is given; nothing listens to the init signals; the model keeps
        # Django's ``__init__`` and ``from_db``): 4 µs a Pair where from_db takes 10.
        instance = self.model.__new__(self.model)
        instance.__dict__.update(zip(self.attnames, values, strict=True))
        state = instance._state = ModelState()
        state.adding = False
        state.db = connection.alias
        return instance

    @cached_property
    def _plain(self) -> bool:
        static = inspect.getattr_static  # the classmethod objects, not bound methods
        model = self.model
        return model.__init__ is Model.__init__ and static(model, "from_db") is static(
            Model, "from_db"
        )


def sql_literals(values: Iterable[str]) -> str:
    """``'a', 'b'``: the code's own constants (statuses, roles) as SQL string literals, for
    a statement written once; never for anything a user sent."""
    return ", ".join(f"'{value}'" for value in values)


def _written_fields(model) -> list:
    """The fields an insert writes: the concrete ones but the primary key."""
    return [field for field in model._meta.concrete_fields if not field.primary_key]


def _db_value(field, instance):
    """``field``'s value in ``instance`` as ``Model.save()`` would write it (its ``pre_save``
    and database value; no model on the hot path has save signals or overrides ``save``)."""
    return field.get_db_prep_save(field.pre_save(instance, True), connection)


def _mark_saved(instance, pk) -> None:
    instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias


_INSERTS: dict[type, tuple[list, str]] = {}


def _insert_statement(model: type) -> tuple[list, str]:
    """A model's non-key fields and its ``INSERT ... RETURNING`` statement, built once."""
    if (known := _INSERTS.get(model)) is not None:
        return known
    meta = model._meta  # type: ignore[attr-defined]
    fields = _written_fields(model)
    columns = ", ".join(f'"{field.column}"' for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f'INSERT INTO "{meta.db_table}" ({columns}) VALUES ({marks}) RETURNING "{meta.pk.column}"'
    _INSERTS[model] = fields, sql
    return fields, sql


def insert_prepared(cursor, name: str, instance) -> None:
    """Inserts an unsaved ``instance`` with one prepared ``INSERT ... RETURNING`` (named
    ``name``), as ``Model.save()`` would write it, and sets its primary key."""
    fields, sql = _insert_statement(type(instance))
    execute_prepared(cursor, name, sql, [_db_value(field, instance) for field in fields])
    _mark_saved(instance, cursor.fetchone()[0])


class InsertSelect:
    """An instance written by ``INSERT ... SELECT`` inside a larger statement (a ``WITH``
    whose earlier parts give some of its values): ``columns`` and ``values`` go into the
    statement, each field a named parameter ``%(<prefix><attname>)s`` but those given as SQL
    in ``computed`` (field name to expression); ``params(instance)`` gives the parameters as
    ``insert_prepared`` would write them, and ``saved(instance, pk)`` marks it written."""

    def __init__(self, model, *, prefix: str, computed: dict[str, str]):
        self.prefix = prefix
        fields = _written_fields(model)
        self.columns = ", ".join(f'"{field.column}"' for field in fields)
        self.values = ", ".join(
            computed.get(field.name, f"%({prefix}{field.attname})s") for field in fields
        )
        self._bound = [field for field in fields if field.name not in computed]

    def params(self, instance) -> dict:
        return {f"{self.prefix}{f.attname}": _db_value(f, instance) for f in self._bound}

    saved = staticmethod(_mark_saved)
