"""Writing an import's rows in bulk: COPY on PostgreSQL, ``bulk_create`` elsewhere."""

from __future__ import annotations

import json
import operator
from typing import Any

from django.db import connection, models
from django.utils import timezone

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


def _as_is(value: Any) -> Any:
    return value


def _json(value: Any) -> str:
    return value if isinstance(value, RawJson) else RawJson.of(value)


class BulkWriter:
    """Writes lists of row dicts. Columns a row leaves out get the model field's default.
    ``encode`` prepares a JSON field's value for this database (encoded text for COPY)."""

    def __init__(self):
        self.postgres = connection.vendor == "postgresql"
        self.now = timezone.now()
        self.encode = RawJson.of if self.postgres else _as_is

    def existing(
        self, model: type[models.Model], column: str, values: list, *, project_id=None, fields=()
    ) -> list:
        """``column`` (and ``fields``) of the rows of ``model`` (in ``project_id``, if given)
        whose ``column`` is one of ``values``: a flat list without ``fields``, tuples with."""
        if not values:
            return []
        if not self.postgres:
            found = model._default_manager.filter(**{f"{column}__in": values})
            if project_id is not None:
                found = found.filter(project_id=project_id)
            if fields:
                return list(found.values_list(column, *fields))
            return list(found.values_list(column, flat=True))
        with connection.cursor() as cursor:
            cursor.execute(*sql.sequential_scans(allowed=False))
            cursor.execute(
                *sql.rows_matching(model, column, values, project_id=project_id, fields=fields)
            )
            rows = cursor.fetchall()
            cursor.execute(*sql.sequential_scans(allowed=True))
        return rows if fields else [row[0] for row in rows]

    def refresh_statistics(self, model: type[models.Model], fields: list[str]) -> None:
        """ANALYZE, seeing this transaction's rows; skipped while another import holds it."""
        if self.postgres:
            with connection.cursor() as cursor:
                cursor.execute(*sql.statistics_refresh(model, fields))

    def insert(self, model: type[models.Model], rows: list[dict]) -> None:
        """Inserts rows that must all be new (a conflict fails the import)."""
        if not rows:
            return
        if self.postgres:
            self._copy(model, rows)
        else:
            model._default_manager.bulk_create([model(**row) for row in rows], batch_size=500)

    def insert_ignoring_conflicts(self, model: type[models.Model], rows: list[dict]) -> None:
        """For rows another transaction may insert at the same time (media are shared)."""
        if rows:
            model._default_manager.bulk_create(
                [model(**row) for row in rows], ignore_conflicts=True, batch_size=500
            )

    def insert_returning_ids(self, model: type[models.Model], rows: list[dict]) -> list[int]:
        """Inserts rows that must all be new; returns their primary keys in order."""
        if not rows:
            return []
        if not self.postgres:
            created = model._default_manager.bulk_create(
                [model(**row) for row in rows], batch_size=500
            )
            return [obj.pk for obj in created]
        with connection.cursor() as cursor:
            cursor.execute(*sql.serial_ids(model, len(rows)))
            ids = [value for (value,) in cursor.fetchall()]
        for row, pk in zip(rows, ids, strict=True):
            row[model._meta.pk.attname] = pk
        self._copy(model, rows)
        return ids

    def _copy(self, model: type[models.Model], rows: list[dict]) -> None:
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
        json_keys = {key for key in keys if isinstance(fields[key], models.JSONField)}
        constant_values = list(constants.values())
        pick = operator.itemgetter(*keys) if len(keys) > 1 else (lambda row: (row[keys[0]],))
        json_positions = [index for index, key in enumerate(keys) if key in json_keys]
        statement, _ = sql.rows_copy(model, [*keys, *constants])
        # COPY goes to psycopg's own cursor: Django's wrapper turns its errors (a lost
        # connection) into django.db errors, as for every other statement.
        with (
            connection.cursor() as cursor,
            connection.wrap_database_errors,
            cursor.cursor.copy(statement) as copy,
        ):
            write_row = copy.write_row
            if not json_positions:
                constant_tuple = tuple(constant_values)
                for row in rows:
                    write_row(pick(row) + constant_tuple)
                return
            for row in rows:
                values = [*pick(row), *constant_values]
                for index in json_positions:
                    values[index] = _json(values[index])
                write_row(values)
