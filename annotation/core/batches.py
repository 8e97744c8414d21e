"""Rows read a batch at a time by primary key, for a command that works long on each row:
each batch is its own short query, so no cursor stays open on the server between them (none
could behind PgBouncer in transaction mode, docs/database.md "Behind PgBouncer"), and rows
never all sit in memory together."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from django.db.models import Model, QuerySet

BATCH_ROWS = 500
M = TypeVar("M", bound=Model)


def in_batches(rows: QuerySet[M], size: int = BATCH_ROWS) -> Iterator[M]:
    """``rows`` in primary-key order, read ``size`` at a time after the last key seen; a row
    changed by the caller so that it no longer matches is not read twice."""
    last = None
    while True:
        page = rows.order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        batch = list(page[:size])
        yield from batch
        if len(batch) < size:
            return
        last = batch[-1].pk
