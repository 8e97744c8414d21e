"""Best-of-N (docs/judges-evaluation.md, "Best-of-N"): given N candidate responses per prompt
and a judge, pick the best, as MMRB2 does to show that benchmark accuracy predicts downstream
quality. Two methods, every comparison judged in both orders:

- ``scores``: every candidate against every other; a candidate's score is the mean over its
  votes of its win probability (the vote's confidence when it names the candidate, one minus
  it when it names the other, 0.5 for a tie; 1 or 0 without a confidence). For a reward model
  this ranks the candidates exactly as their rewards do. N(N-1) calls per prompt.
- ``knockout``: a single-elimination bracket in input order (an odd one out advances); a match
  goes to the candidate with more votes, then to the higher summed confidence, then to the
  earlier one. 2(N-1) calls per prompt.

A prompt on which the judge gave no valid vote (every answer an error, an abstention or
unreadable; by knockout, on any one match, which then has no winner and ends the bracket) has
no winner: ``best`` is None and ``no_winner`` says why, naming what the judge gave instead.

Input, one prompt per JSONL line (or a list for the API): ``{"id": "...", "prompt": content,
"task": "...", "criterion": "...", "candidates": [{"id": "...", "content": content}, ...]}``,
where content is a string or a list of ``["text", "..."]`` and ``["image", "<sha256 of a stored
image>"]`` (``"video"``, ``"audio"``, ``"model3d"`` alike, each the hash of stored media of that
kind).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from django.core.exceptions import ValidationError

from annotation.core.content import MEDIA_PART_TYPES, media_part, text_part
from annotation.core.json_input import JsonRefused, json_loads, text_refusal
from annotation.models import Media, Project, ProjectMedia
from judges import backends
from judges.backends.base import JudgeItem, JudgeResult, Order, judge_judgeable
from judges.evaluation.scoring import ORDERS
from judges.models import BestOfNRun, Judge
from judges.roster.services import check_judge_enabled

METHODS = ("scores", "knockout")
MIN_CANDIDATES = 2
# What one API request may ask of a judge; the command line has no limit.
MAX_API_CALLS = 2000
MAX_ERRORS = 50
# An error's or an abstention's reason, as far as a result without a winner quotes it.
MAX_REASON_CHARS = 200


@dataclass(frozen=True)
class Candidate:
    id: str
    content: list[dict]


@dataclass(frozen=True)
class BestOfNItem:
    id: str
    prompt: list[dict]
    candidates: list[Candidate]
    task: str = ""
    criterion: str = ""


@dataclass
class _Match:
    """One comparison, judged in both orders: ``votes`` per candidate id, summed confidences."""

    item: BestOfNItem
    first: Candidate
    second: Candidate
    votes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    strength: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    answers: list[str] = field(default_factory=list)
    # Why an order gave no vote: the error, or what the judge answered instead of a vote.
    failures: list[str] = field(default_factory=list)

    @property
    def valid(self) -> int:
        return sum(1 for answer in self.answers if answer in VOTES)

    def winner(self) -> Candidate | None:
        """The candidate the votes favour; None when neither order gave a valid vote."""
        if not self.valid:
            return None
        a, b = self.first, self.second
        key = lambda c: (self.votes[c.id], self.strength[c.id])  # noqa: E731
        return b if key(b) > key(a) else a


# The answers that are votes; "error", "unparseable" and "abstain" are not.
VOTES = ("A", "B", "tie")
_NO_VOTE = {
    "error": "an error",
    "unparseable": "an answer that could not be read",
    "abstain": "an abstention",
}


def _no_winner(failures: list[str], *, judged: str) -> str:
    """Why a prompt has no best candidate: the judge gave no valid vote on ``judged``, and
    what it gave instead, each distinct reason once with how often ("an error (...) twice")."""
    counted: dict[str, int] = {}
    for failure in failures:
        counted[failure] = counted.get(failure, 0) + 1
    gave = "; ".join(
        what + {1: "", 2: " twice"}.get(n, f" {n} times") for what, n in counted.items()
    )
    return f"No winner: the judge gave no valid vote on {judged}, only {gave}."


def calls_needed(items: Iterable[BestOfNItem], method: str) -> int:
    n = [len(item.candidates) for item in items]
    return sum(k * (k - 1) if method == "scores" else 2 * (k - 1) for k in n)


def _content(value, where: str, errors: list[str]) -> list[dict]:
    if isinstance(value, str):
        return [text_part(value)]
    if not isinstance(value, list) or not value:
        errors.append(f'{where}: a string or a list of ["text", ...] / ["image", sha256]')
        return []
    parts = []
    for index, part in enumerate(value):
        kind = part[0] if isinstance(part, list) and len(part) == 2 else None
        if kind == "text" and isinstance(part[1], str):
            parts.append(text_part(part[1]))
        elif kind in MEDIA_PART_TYPES and isinstance(part[1], str):
            parts.append(media_part(kind, part[1].lower()))
        else:
            errors.append(
                f'{where}[{index}]: must be ["text", "..."] or [kind, "<sha256>"] with kind one '
                f"of {', '.join(MEDIA_PART_TYPES)}"
            )
    return parts


def parse_items(
    rows: Iterable[tuple[str, object]], *, project: Project | None = None
) -> list[BestOfNItem]:
    """The items of ``rows`` (where, decoded JSON value); ValidationError listing every bad
    field by its line or index. Images must be in the media store, and with ``project`` among
    that project's media (so no one reaches another project's images by their hash)."""
    errors: list[str] = []
    items: list[BestOfNItem] = []
    seen: set[str] = set()
    for where, row in rows:
        if not isinstance(row, dict):
            errors.append(f"{where}: each item must be a JSON object")
            continue
        item_id = row.get("id")
        if not isinstance(item_id, str | int) or isinstance(item_id, bool) or item_id == "":
            errors.append(f"{where}: id: required (a string)")
            continue
        if str(item_id) in seen:
            errors.append(f"{where}: id: {item_id!r} is given twice")
        seen.add(str(item_id))
        prompt = _content(row.get("prompt"), f"{where}: prompt", errors)
        raw = row.get("candidates")
        if not isinstance(raw, list) or len(raw) < MIN_CANDIDATES:
            errors.append(f"{where}: candidates: a list of at least {MIN_CANDIDATES}")
            continue
        candidates, ids = [], set()
        for index, candidate in enumerate(raw):
            at = f"{where}: candidates[{index}]"
            if not isinstance(candidate, dict) or not isinstance(candidate.get("id"), str | int):
                errors.append(f"{at}: an object with an id and content")
                continue
            if str(candidate["id"]) in ids:
                errors.append(f"{at}.id: {candidate['id']!r} is given twice")
            ids.add(str(candidate["id"]))
            content = _content(candidate.get("content"), f"{at}.content", errors)
            candidates.append(Candidate(str(candidate["id"]), content))
        for name in ("task", "criterion"):
            if not isinstance(row.get(name, ""), str):
                errors.append(f"{where}: {name}: must be a string")
        items.append(
            BestOfNItem(
                str(item_id),
                prompt,
                candidates,
                str(row.get("task", "")),
                str(row.get("criterion", "")),
            )
        )
    wanted = {
        (part["media"], part["type"])
        for item in items
        for content in (item.prompt, *(c.content for c in item.candidates))
        for part in content
        if part["type"] != "text"
    }
    hashes = {sha for sha, _ in wanted}
    if project is None:
        rows = Media.objects.filter(sha256__in=hashes).values_list("sha256", "kind")
    else:
        rows = ProjectMedia.objects.filter(project=project, media__sha256__in=hashes).values_list(
            "media__sha256", "media__kind"
        )
    stored = dict(rows)
    where = "the media store" if project is None else f"the media of project {project.slug}"
    for sha, kind in sorted(wanted):
        if sha not in stored:
            errors.append(f"{kind} {sha[:16]}...: not in {where}")
        elif stored[sha] != kind:
            errors.append(f"{kind} {sha[:16]}...: is stored as {stored[sha]}, not {kind}")
    if not items and not errors:
        errors.append("no items")
    if errors:
        raise ValidationError(errors[:MAX_ERRORS])
    return items


def parse_jsonl(lines: Iterable[str], *, project: Project | None = None) -> list[BestOfNItem]:
    rows, errors = [], []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            rows.append((f"line {number}", json_loads(text)))
        except JsonRefused as exc:
            errors.append(f"line {number}: {exc}")
    if errors:
        raise ValidationError(errors[:MAX_ERRORS])
    return parse_items(rows, project=project)


def _judge(backend, matches: list[_Match]) -> int:
    """Judges every match in both orders in one batch; returns the calls made."""
    todo: list[tuple[_Match, JudgeItem]] = []
    for match in matches:
        orders: tuple[Order, Order] = ("AB", "BA")
        for order in orders:
            first, second = (match.first, match.second)
            if order == "BA":
                first, second = second, first
            todo.append(
                (
                    match,
                    JudgeItem(
                        pair_id=len(todo),
                        order=order,
                        task=match.item.task,
                        prompt=match.item.prompt,
                        first=first.content,
                        second=second.content,
                        criterion=match.item.criterion,
                    ),
                )
            )
    items = [item for _, item in todo]
    results: list[JudgeResult] = judge_judgeable(backend, items) if todo else []
    for (match, item), result in zip(todo, results, strict=True):
        if result.outcome != "ok" or result.preferred not in ("first", "second", "tie"):
            outcome = result.outcome if result.outcome in _NO_VOTE else "unparseable"
            match.answers.append(outcome)
            why = {"error": result.error, "abstain": result.reasoning}.get(outcome, "").strip()
            if len(why) > MAX_REASON_CHARS:
                why = why[: MAX_REASON_CHARS - 1] + "…"
            match.failures.append(f"{_NO_VOTE[outcome]} ({why})" if why else _NO_VOTE[outcome])
            continue
        side = item.canonical_side(result.preferred)
        match.answers.append(side)
        if side == "tie":
            for candidate in (match.first, match.second):
                match.votes[candidate.id] += 0.5
                match.strength[candidate.id] += 0.5
            continue
        chosen, other = (match.first, match.second) if side == "A" else (match.second, match.first)
        confidence = result.confidence if result.confidence is not None else 1.0
        match.votes[chosen.id] += 1
        match.strength[chosen.id] += confidence
        match.strength[other.id] += 1 - confidence
    return sum(result.attempts or 1 for result in results)


def _by_scores(backend, items: list[BestOfNItem]) -> tuple[list[dict], int]:
    matches = [
        _Match(item, a, b)
        for item in items
        for i, a in enumerate(item.candidates)
        for b in item.candidates[i + 1 :]
    ]
    calls = _judge(backend, matches)
    out = []
    for item in items:
        strength: dict[str, float] = defaultdict(float)
        votes: dict[str, int] = defaultdict(int)
        for match in (m for m in matches if m.item is item):
            for candidate in (match.first, match.second):
                strength[candidate.id] += match.strength[candidate.id]
                votes[candidate.id] += match.valid
        scores = {
            c.id: (strength[c.id] / votes[c.id] if votes[c.id] else None) for c in item.candidates
        }
        order = {c.id: index for index, c in enumerate(item.candidates)}
        best = min(
            item.candidates,
            key=lambda c: (scores[c.id] is None, -(scores[c.id] or 0), order[c.id]),
        )
        result: dict = {"id": item.id, "best": best.id, "no_winner": None, "method": "scores"}
        result["scores"] = scores
        if scores[best.id] is None:  # not one valid vote: no candidate is better than another
            played = [m for m in matches if m.item is item]
            comparisons = f"any of its {len(played)} comparisons in either order"
            failures = [failure for match in played for failure in match.failures]
            result.update(best=None, no_winner=_no_winner(failures, judged=comparisons))
        out.append(result)
    return out, calls


def _knockout(backend, items: list[BestOfNItem]) -> tuple[list[dict], int]:
    alive = {item.id: list(item.candidates) for item in items}
    rounds: dict[str, list[list[dict]]] = {item.id: [] for item in items}
    # A match without a valid vote has no winner, so its bracket cannot be finished: the
    # prompt stops there, with no winner and the reason.
    undecided: dict[str, str] = {}
    calls = 0
    while any(len(entrants) > 1 for entrants in alive.values()):
        matches = []
        for item in items:
            field_ = alive[item.id]
            matches += [
                _Match(item, field_[i], field_[i + 1]) for i in range(0, len(field_) - 1, 2)
            ]
        calls += _judge(backend, matches)
        for item in items:
            field_ = alive[item.id]
            if len(field_) < 2:
                continue
            played = [m for m in matches if m.item is item]
            rounds[item.id].append(
                [
                    {
                        "first": m.first.id,
                        "second": m.second.id,
                        "answers": dict(zip(ORDERS, m.answers, strict=True)),
                        "winner": None if (winner := m.winner()) is None else winner.id,
                    }
                    for m in played
                ]
            )
            if stuck := [m for m in played if m.winner() is None]:
                number = len(rounds[item.id])
                names = " and ".join(f"{m.first.id} vs {m.second.id}" for m in stuck)
                where = f"round {number}'s match{'es' if len(stuck) > 1 else ''} {names}"
                failures = [failure for match in stuck for failure in match.failures]
                them = "them" if len(stuck) > 1 else "it"
                undecided[item.id] = (
                    f"{_no_winner(failures, judged=where)} The bracket cannot go on without {them}."
                )
                alive[item.id] = []
                continue
            winners = [cast(Candidate, match.winner()) for match in played]
            if len(field_) % 2:
                winners.append(field_[-1])  # the odd one out advances
            alive[item.id] = winners
    out = []
    for item in items:
        best = None if item.id in undecided else alive[item.id][0].id
        out.append(
            {
                "id": item.id,
                "best": best,
                "no_winner": undecided.get(item.id),
                "method": "knockout",
                "rounds": rounds[item.id],
            }
        )
    return out, calls


def best_of_n(*, judge: Judge, items: list[BestOfNItem], method: str) -> dict:
    """The best candidate of each item by ``method``; ``{"results": [...], "calls": n}``.
    ``answers`` in a knockout round give each order's canonical side (A = ``first``)."""
    if method not in METHODS:
        raise ValidationError({"method": f"Choose one of {', '.join(METHODS)}."})
    check_judge_enabled(judge)  # a disabled judge is never called
    backend = backends.get_backend(judge)
    try:
        results, calls = (_by_scores if method == "scores" else _knockout)(backend, items)
    finally:
        backend.close()
    return {"judge": judge.name, "method": method, "results": results, "calls": calls}


def _check_storable_ids(items: list[BestOfNItem]) -> None:
    """The outcome kept holds the ids: refuses those a JSON column cannot store."""
    errors = [
        f"{item.id!r}: ids may not hold NUL characters or lone surrogates"
        for item in items
        if any(text_refusal(text) for text in (item.id, *(c.id for c in item.candidates)))
    ]
    if errors:
        raise ValidationError({"candidates": errors[:MAX_ERRORS]})


def best_of_n_run(
    *, project: Project, judge: Judge, items: list[BestOfNItem], method: str, created_by
) -> BestOfNRun:
    """Runs ``best_of_n`` as the API does (synchronously, within ``MAX_API_CALLS``) and keeps
    its outcome for the run's page and downloads."""
    _check_storable_ids(items)
    if (calls := calls_needed(items, method)) > MAX_API_CALLS:
        raise ValidationError(
            {"candidates": f"{calls} judge calls by {method}; a run may make {MAX_API_CALLS}."}
        )
    outcome = best_of_n(judge=judge, items=items, method=method)
    return BestOfNRun.objects.create(
        project=project,
        judge=judge,
        method=method,
        prompts=len(items),
        outcome=outcome,
        contents=[
            {
                "id": item.id,
                "prompt": item.prompt,
                "candidates": [{"id": c.id, "content": c.content} for c in item.candidates],
            }
            for item in items
        ],
        created_by=created_by,
    )
