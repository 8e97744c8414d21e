"""Importing judgements made elsewhere (docs/judges-evaluation.md, "Importing judgements"):
JSONL, one answer per line, ``{"pair": "external id", "order": "AB"|"BA", "verdict":
"A"|"B"|"tie", "score": number, "confidence": 0..1}`` with ``verdict`` or ``score`` (A minus B;
its sign gives the side when no verdict is given). All or nothing: any bad line and nothing is
imported, with every error naming its line and field."""

from __future__ import annotations

import math
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.json_input import JsonRefused, json_loads
from annotation.models import Pair, Project
from judges.evaluation import LABELS, ORDERS
from judges.models import Judge, Judgement

MAX_ERRORS = 50
_FIELDS = {"pair", "order", "verdict", "score", "confidence"}


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _parse_line(number: int, text: str, errors: list[str]) -> dict | None:
    def fail(field: str, message: str) -> None:
        errors.append(f"line {number}: {field}: {message}")

    try:
        row = json_loads(text)
    except JsonRefused as exc:  # NUL, lone surrogates, overflowing numbers, deep nesting too
        fail("json", str(exc))
        return None
    if not isinstance(row, dict):
        fail("json", "each line must be a JSON object")
        return None
    before = len(errors)
    if unknown := sorted(set(row) - _FIELDS):
        fail(unknown[0], f"unknown field (allowed: {', '.join(sorted(_FIELDS))})")
    pair = row.get("pair")
    if not isinstance(pair, str | int) or isinstance(pair, bool) or str(pair) == "":
        fail("pair", "the pair's id (its external id in the project) is required")
    if row.get("order") not in ORDERS:
        fail("order", "must be AB (A shown first) or BA")
    verdict, score = row.get("verdict"), row.get("score")
    if verdict is None and score is None:
        fail("verdict", "give a verdict (A, B or tie) or a score")
    if verdict is not None and verdict not in LABELS:
        fail("verdict", "must be A, B or tie")
    if score is not None and _number(score) is None:
        fail("score", "must be a number (A minus B)")
    confidence = _number(row.get("confidence"))
    if "confidence" in row and row["confidence"] is not None:
        if confidence is None or not 0 <= confidence <= 1:
            fail("confidence", "must be a number from 0 to 1")
    if len(errors) > before:
        return None
    margin = _number(score)
    if verdict is None:
        verdict = "tie" if not margin else "A" if margin > 0 else "B"
    return {
        "pair": str(pair),
        "order": row["order"],
        "side": verdict,
        "margin": margin,
        "confidence": confidence,
    }


def judgements_import(*, judge: Judge, project: Project, lines: Iterable[str]) -> int:
    """Stores the judgements of ``lines`` as ``judge``'s on the project's pairs, replacing any
    it had for the same (pair, order); returns how many. ValidationError with one message per
    bad line (the first ``MAX_ERRORS``), and then nothing is stored."""
    errors: list[str] = []
    rows: dict[tuple[str, str], tuple[int, dict]] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        row = _parse_line(number, text, errors)
        if row is None:
            continue
        key = (row["pair"], row["order"])
        if key in rows:
            errors.append(
                f"line {number}: pair: {row['pair']} {row['order']} was given on line "
                f"{rows[key][0]} already"
            )
            continue
        rows[key] = (number, row)
    ids = dict(
        Pair.objects.filter(
            project=project, external_id__in={pair for pair, _ in rows}
        ).values_list("external_id", "pk")
    )
    for (pair, _), (number, _) in rows.items():
        if pair not in ids:
            errors.append(f"line {number}: pair: no pair {pair!r} in project {project.slug}")
    if not rows and not errors:
        errors.append("line 1: the file holds no judgements")
    if errors:
        errors.sort(key=lambda message: int(message.split(":")[0].split()[1]))
        shown = errors[:MAX_ERRORS]
        if len(errors) > MAX_ERRORS:
            shown.append(f"... and {len(errors) - MAX_ERRORS} more errors")
        raise ValidationError(shown)
    judgements = [
        Judgement(
            judge=judge,
            pair_id=ids[row["pair"]],
            order=row["order"],
            source=Judgement.Source.IMPORT,
            outcome=Judgement.Outcome.OK,
            side=row["side"],
            confidence=row["confidence"],
            margin=row["margin"],
        )
        for _, row in rows.values()
    ]
    with transaction.atomic():
        for start in range(0, len(judgements), 2000):
            chunk = judgements[start : start + 2000]
            for order in ORDERS:
                Judgement.objects.filter(
                    judge=judge,
                    order=order,
                    pair_id__in=[j.pair_id for j in chunk if j.order == order],
                ).delete()
        Judgement.objects.bulk_create(judgements, batch_size=2000)
    return len(judgements)
