"""A filter run's batches (docs/judges-runs.md, "How a run executes"): their rows claimed by
the task that judges them and pulled by a task whose judges' slots run low, and their
verdicts written as one INSERT from arrays."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from judges.models import FilterRun, FilterRunBatch, Judge, Verdict
from judges.runs.calls import Work

# Every column of a verdict but its id, in the order ``verdicts_write`` writes them.
_VERDICT_FIELDS = [field for field in Verdict._meta.concrete_fields if not field.primary_key]
_TEXTS = {"CharField", "TextField"}


def _verdict_column(field) -> tuple[str, Callable[[Any], Any] | None]:
    """A column's array type in ``verdicts_write`` and what its values are made into first.
    psycopg refuses an array of mixed types (a backend's ``1`` beside ``0.5``, a server's
    ``true`` as a token count), which ``bulk_create`` coerced field by field; and text goes
    as ``text[]``, so that a value too long for its column is refused by the column, not cut
    by the array's cast."""
    kind = field.get_internal_type()
    if kind in _TEXTS:
        return "text", None
    make: Callable[[Any], Any] | None = None
    if kind.endswith("IntegerField"):
        make = int
    elif kind == "FloatField":
        make = float
    return field.db_type(connection), make


def verdicts_write(*, run_id: int, answers: dict[Judge, list[dict]]) -> None:
    """Writes ``answers`` (per judge, fields of ``Answer``) as the run's verdicts, skipping
    any (judge, pair, order) that has one (a batch run twice), as one INSERT from arrays:
    ``bulk_create`` built a model per verdict, holding the worker process's interpreter lock
    long enough to delay the calls on its event loop (docs/judges-runs.md, "Speed")."""
    now = timezone.now()
    rows = [
        {**fields, "run_id": run_id, "judge_id": judge.pk, "created_at": now}
        for judge, per_judge in answers.items()
        for fields in per_judge
    ]
    columns = [_verdict_column(field) for field in _VERDICT_FIELDS]
    names = ", ".join(f'"{field.column}"' for field in _VERDICT_FIELDS)
    arrays = ", ".join(f"%s::{array}[]" for array, _ in columns)
    sql = (
        f'INSERT INTO "{Verdict._meta.db_table}" ({names}) '
        f"SELECT * FROM unnest({arrays}) ON CONFLICT DO NOTHING"
    )
    values = []
    for field, (_, make) in zip(_VERDICT_FIELDS, columns, strict=True):
        column = [row[field.attname] for row in rows]
        if make is not None:
            column = [None if value is None else make(value) for value in column]
        values.append(column)
    with connection.cursor() as cursor:
        cursor.execute(sql, values)


def batch_queue(work: list) -> str | None:
    """The queue of a batch's judges (None when none of them is left)."""
    judge = Judge.objects.filter(pk__in=[judge_id for judge_id, _ in work]).first()
    return None if judge is None else judge.queue


def batch_claim(*, run: FilterRun, batch_id: int, owner: str, work: list) -> list:
    """The work this task judges: its batch, unless another task claimed it first, and what
    ``owner`` claimed in an earlier delivery (its process died). A batch whose row is gone
    (a resume enqueued its work again) is judged as its message says."""
    claimed = FilterRunBatch.objects.filter(pk=batch_id, run=run, owner="").update(
        owner=owner, claimed_at=timezone.now()
    )
    held = FilterRunBatch.objects.filter(run=run, owner=owner).order_by("pk")
    mine = [entry for batch in held.values_list("work", flat=True) for entry in batch]
    if not claimed and not FilterRunBatch.objects.filter(pk=batch_id).exists():
        return [*work, *mine]
    return mine


def batch_feeder(
    *,
    run: FilterRun,
    queue: str,
    owner: str,
    until: float,
    build: Callable[[FilterRun, list], Work | None],
) -> Callable[[], Work | None]:
    """Pulls the run's next unclaimed batch of ``queue`` for ``owner``, until ``until``;
    ``build`` makes a batch's work into its calls (None: the run failed)."""

    def more() -> Work | None:
        while time.monotonic() < until:
            with transaction.atomic():
                batch = (
                    FilterRunBatch.objects.select_for_update(skip_locked=True)
                    .filter(run=run, queue=queue, owner="")
                    .order_by("pk")
                    .only("pk", "work")
                    .first()
                )
                if batch is None:
                    return None
                FilterRunBatch.objects.filter(pk=batch.pk).update(
                    owner=owner, claimed_at=timezone.now()
                )
            work = build(run, batch.work)
            if work is None:
                return None
            if work.todo:
                return work
        return None

    return more
