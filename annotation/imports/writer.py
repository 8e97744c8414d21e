"""Writing an import's rows in bulk: COPY, in order on a thread of its own while the import
prepares its next batch (``BulkWriter.in_order``)."""

from __future__ import annotations

import functools
import io
import json
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone
from psycopg.copy import FileWriter

from annotation.core.threads import InOrder, quick_thread_switches
from annotation.imports import sql


class RawJson(str):
    """JSON text encoded ahead of time, written as it is."""

    @classmethod
    def of(cls, value: Any) -> RawJson:
        if not value and isinstance(value, dict):
            return _EMPTY_OBJECT  # most metadata is empty: skip the encoder
        return cls(_encode(value))


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_EMPTY_OBJECT = RawJson("{}")


def _json(value: Any) -> str:
    return value if isinstance(value, RawJson) else RawJson.of(value)


class BulkWriter:
    """Writes lists of row dicts. Columns a row leaves out get the model field's default.
    ``encode`` prepares a JSON field's value for this database (encoded text for COPY)."""

    def __init__(self):
        # This thread's connection, which the statements' thread shares (``in_order``).
        self.connection = connections[DEFAULT_DB_ALIAS]
        self.now = timezone.now()
        self.encode = RawJson.of
        self._statements: InOrder | None = None
        # Inside ``in_order``: the connection of this thread's own (ids, COPY's encoding).
        self._side: BaseDatabaseWrapper | None = None

    @contextmanager
    def in_order(self) -> Iterator[None]:
        """For the block, ``later`` hands its calls to a thread of their own,
        which runs them in order on this connection, in its transaction, while the caller
        prepares the next: the database works on one batch while Python reads the next. Every
        other statement of this writer waits for them first (``settle``), and so must the
        caller's own. At the end of the block they have all run (their first error raised);
        on an error, those still waiting are dropped."""
        self.connection.inc_thread_sharing()
        self._statements = InOrder(name="import-writer")
        self._side = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            with quick_thread_switches():
                yield
                self._statements.drain()
        finally:
            self._statements.close()
            self._statements = None
            self._side.close()
            self._side = None
            self.connection.dec_thread_sharing()

    def later(self, call: Callable[..., object], *args: Any) -> None:
        """``call(*args)``, on the statements' thread inside ``in_order``, at once outside it."""
        if self._statements is None:
            call(*args)
        else:
            self._statements.submit(functools.partial(call, *args))

    def settle(self) -> None:
        """Waits until the calls given to ``later`` have run (raising the first one's error):
        before any statement of this thread's own on the connection."""
        if self._statements is not None:
            self._statements.drain()

    def existing(
        self, model: type[models.Model], column: str, values: list, *, project_id=None, fields=()
    ) -> list:
        """``column`` (and ``fields``) of the rows of ``model`` (in ``project_id``, if given)
        whose ``column`` is one of ``values``: a flat list without ``fields``, tuples with."""
        if not values:
            return []
        self.settle()
        with self.connection.cursor() as cursor:
            cursor.execute(*sql.sequential_scans(allowed=False))
            cursor.execute(
                *sql.rows_matching(model, column, values, project_id=project_id, fields=fields)
            )
            rows = cursor.fetchall()
            cursor.execute(*sql.sequential_scans(allowed=True))
        return rows if fields else [row[0] for row in rows]

    def refresh_statistics(self, model: type[models.Model], fields: list[str]) -> None:
        """ANALYZE, seeing this transaction's rows; skipped while another import holds it."""
        self.settle()
        with self.connection.cursor() as cursor:
            cursor.execute(*sql.statistics_refresh(model, fields))

    def insert(self, model: type[models.Model], rows: list[dict]) -> None:
        """Inserts rows that must all be new (a conflict fails the import). The rows are
        encoded here and sent by ``later``: inside ``in_order``, on its thread."""
        if rows:
            self.later(self._send, *self._copy_data(model, rows))

    def insert_ignoring_conflicts(self, model: type[models.Model], rows: list[dict]) -> None:
        """For rows another transaction may insert at the same time (media are shared)."""
        if rows:
            self.settle()
            model._default_manager.bulk_create(
                [model(**row) for row in rows], ignore_conflicts=True, batch_size=500
            )

    def insert_returning_ids(self, model: type[models.Model], rows: list[dict]) -> list[int]:
        """Inserts rows that must all be new; returns their primary keys in order."""
        if not rows:
            return []
        # The sequence's values are not part of any transaction: inside ``in_order`` they are
        # taken on a connection of their own, so this thread need not wait for the statements'.
        side = self._side or self.connection
        with side.cursor() as cursor:
            cursor.execute(*sql.serial_ids(model, len(rows)))
            ids = [value for (value,) in cursor.fetchall()]
        for row, pk in zip(rows, ids, strict=True):
            row[model._meta.pk.attname] = pk
        self.insert(model, rows)
        return ids

    def _copy_data(self, model: type[models.Model], rows: list[dict]) -> tuple[str, bytes]:
        """The COPY statement for ``rows`` and its data, in COPY's text format."""
        keys = list(rows[0])
        fields = {f.attname: f for f in model._meta.concrete_fields}
        constants: dict[str, Any] = {}
        for attname, model_field in fields.items():
            if attname in keys or model_field.primary_key:
                continue
            if model_field.db_default is not models.NOT_PROVIDED and not model_field.has_default():
                continue
            if getattr(model_field, "auto_now", False) or getattr(
                model_field, "auto_now_add", False
            ):
                constants[attname] = self.now
            else:
                value = model_field.get_default()
                is_json = isinstance(model_field, models.JSONField)
                constants[attname] = _json(value) if is_json else value
        json_positions = [
            index for index, key in enumerate(keys) if isinstance(fields[key], models.JSONField)
        ]
        constant_values = list(constants.values())
        pick = operator.itemgetter(*keys) if len(keys) > 1 else (lambda row: (row[keys[0]],))
        statement, _ = sql.rows_copy(model, [*keys, *constants])
        # Encoded here by psycopg's own COPY formatter, into memory (no statement is sent),
        # with the adapters of a connection this thread alone uses: inside ``in_order`` the
        # statements' thread is sending the batch before on the other.
        formatting = self._side or self.connection
        formatting.ensure_connection()
        data = io.BytesIO()
        with (
            formatting.connection.cursor() as cursor,
            psycopg.Copy(cursor, binary=False, writer=FileWriter(data)) as copy,
        ):
            write_row = copy.write_row
            if not json_positions:
                constant_tuple = tuple(constant_values)
                for row in rows:
                    write_row(pick(row) + constant_tuple)
            else:
                for row in rows:
                    values = [*pick(row), *constant_values]
                    for index in json_positions:
                        values[index] = _json(values[index])
                    write_row(values)
        return statement, data.getvalue()

    def _send(self, statement: str, data: bytes) -> None:
        # COPY goes to psycopg's own cursor: Django's wrapper turns its errors (a lost
        # connection) into django.db errors, as for every other statement.
        with (
            self.connection.cursor() as cursor,
            self.connection.wrap_database_errors,
            cursor.cursor.copy(statement) as copy,
        ):
            copy.write(data)
