"""Importing judgements made elsewhere (docs/judges-evaluation.md, "Importing judgements"):
JSONL, one answer per line, ``{"pair": "external id", "order": "AB"|"BA", "verdict":
"A"|"B"|"tie", "score": number, "confidence": 0..1}`` with ``verdict`` or ``score`` (A minus B;
its sign gives the side when no verdict is given). All or nothing: any bad line and nothing is
imported, with every error naming its line and field."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NoReturn

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.core.json_input import JsonRefused, json_loads
from annotation.models import Project
from annotation.pairs.selectors import pair_pks_by_external_id
from judges.evaluation.scoring import LABELS, ORDERS
from judges.models import Judge, Judgement

MAX_ERRORS = 50


def _refuse(errors: list[str]) -> NoReturn:
    """Raises the errors, the first ``MAX_ERRORS`` of them and how many more there are."""
    shown = errors[:MAX_ERRORS]
    if len(errors) > MAX_ERRORS:
        shown.append(f"... and {len(errors) - MAX_ERRORS} more errors")
    raise ValidationError(shown)


def _imported(judge: Judge, ids: dict[str, int], row: dict, **fields) -> Judgement:
    """``row``'s judgement of its pair in its order, by ``judge``, imported."""
    return Judgement(
        judge=judge,
        pair_id=ids[row["pair"]],
        order=row["order"],
        source=Judgement.Source.IMPORT,
        side=row["side"],
        **fields,
    )


def _judgements_replace(judge: Judge, judgements: list[Judgement]) -> int:
    """Stores ``judgements`` in one transaction, replacing the judge's own for the same
    (pair, order); returns how many."""
    with transaction.atomic():
        for order in ORDERS:
            chosen = [j.pair_id for j in judgements if j.order == order]
            for start in range(0, len(chosen), 2000):
                Judgement.objects.filter(
                    judge=judge, order=order, pair_id__in=chosen[start : start + 2000]
                ).delete()
        Judgement.objects.bulk_create(judgements, batch_size=2000)
    return len(judgements)


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
    if row.get("confidence") is not None and (confidence is None or not 0 <= confidence <= 1):
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
    ids = pair_pks_by_external_id(project=project, external_ids={pair for pair, _ in rows})
    for (pair, _), (number, _) in rows.items():
        if pair not in ids:
            errors.append(f"line {number}: pair: no pair {pair!r} in project {project.slug}")
    if not rows and not errors:
        errors.append("line 1: the file holds no judgements")
    if errors:
        errors.sort(key=lambda message: int(message.split(":")[0].split()[1]))
        _refuse(errors)
    judgements = [
        _imported(
            judge,
            ids,
            row,
            outcome=Judgement.Outcome.OK,
            confidence=row["confidence"],
            margin=row["margin"],
        )
        for _, row in rows.values()
    ]
    return _judgements_replace(judge, judgements)


# ---- MMRB2's own prediction files ----

# MMRB2's evaluate scripts write one JSON object per task: pair id -> {"forward": [{"judgement":
# "A"}], "reverse": [...]}. "forward" shows the pair as given (order AB); "reverse" shows B
# first, so its judgement names the responses as shown and is flipped back to canonical terms
# (MMRB2's compute_accuracy.py, flip_judgement).
MMRB2_ORDERS = {"forward": "AB", "reverse": "BA"}
_MMRB2_JUDGEMENTS = {"A": "A", "B": "B", "tie": "tie"}
_FLIP = {"A": "B", "B": "A", "tie": "tie"}


def is_mmrb2_predictions(data) -> bool:
    """Whether a decoded JSON document is an MMRB2 prediction file (an object of objects),
    not one line of Arbiter's JSONL (an object of plain values)."""
    return (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(value, dict) for value in data.values())
    )


def _mmrb2_rows(data: dict, errors: list[str]) -> list[dict]:
    """The answers of an MMRB2 prediction file, canonical; an order whose list is empty is
    not answered (no row), a judgement that is null or "" is an abstention (MMRB2 leaves both
    out of its denominator)."""
    rows = []
    for pair_id, prediction in data.items():
        if unknown := sorted(set(prediction) - set(MMRB2_ORDERS)):
            errors.append(f"pair {pair_id}: {unknown[0]}: unknown field (forward, reverse)")
            continue
        for key, order in MMRB2_ORDERS.items():
            answers = prediction.get(key)
            if answers is None or answers == []:
                continue
            first = answers[0] if isinstance(answers, list) else None
            if not isinstance(first, dict):
                errors.append(f'pair {pair_id}: {key}: must be a list like [{{"judgement": "A"}}]')
                continue
            said = first.get("judgement")
            if said is None or said == "":
                side, outcome = "", Judgement.Outcome.ABSTAIN
            elif isinstance(said, str) and said in _MMRB2_JUDGEMENTS:
                side = _MMRB2_JUDGEMENTS[said]
                side = _FLIP[side] if order == "BA" else side
                outcome = Judgement.Outcome.OK
            else:
                shown = repr(said) if isinstance(said, str | int | float) else "a value"
                errors.append(
                    f"pair {pair_id}: {key}[0].judgement: {shown[:60]} is not A, B or tie"
                )
                continue
            rows.append(
                {
                    "pair": str(pair_id),
                    "order": order,
                    "side": side,
                    "outcome": outcome,
                    "raw": said if isinstance(said, str) else "",
                }
            )
    return rows


def judgements_import_mmrb2(*, judge: Judge, project: Project, data: dict) -> int:
    """Stores the answers of an MMRB2 prediction file (``is_mmrb2_predictions``) as
    ``judge``'s, replacing any it had for the same (pair, order); returns how many.
    ValidationError naming every bad pair, and then nothing is stored."""
    errors: list[str] = []
    rows = _mmrb2_rows(data, errors)
    ids = pair_pks_by_external_id(project=project, external_ids={row["pair"] for row in rows})
    for pair in sorted({row["pair"] for row in rows} - set(ids)):
        errors.append(f"pair {pair}: no pair {pair!r} in project {project.slug}")
    if not rows and not errors:
        errors.append("the file holds no judgements")
    if errors:
        _refuse(errors)
    judgements = [
        _imported(judge, ids, row, outcome=row["outcome"], raw=row["raw"][:200]) for row in rows
    ]
    return _judgements_replace(judge, judgements)


def judgements_import_text(*, judge: Judge, project: Project, text: str) -> int:
    """Imports a judgements file in either format: MMRB2's prediction object, or Arbiter's
    JSONL (one answer per line)."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{"):
        try:
            data = json_loads(stripped)
        except JsonRefused:
            data = None
        if is_mmrb2_predictions(data):
            return judgements_import_mmrb2(judge=judge, project=project, data=data)
    # Split on "\n" only, as readlines does: str.splitlines would also cut at U+2028 inside
    # a JSON string.
    return judgements_import(judge=judge, project=project, lines=text.split("\n"))
