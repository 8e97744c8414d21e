"""The agreement report of a project, built over the database (docs/agreement.md, "The
report"); its cache is ``annotation.agreement.services``.

Votes are read in one pass with ``values_list`` into numpy arrays, never as model instances,
and every figure comes from ``annotation.agreement.statistics`` on the whole project and on
the subsets of it (each task, each criterion, the votes up to each point of the history).
Gold pairs and adjudications are never annotators' votes here: gold votes only give each
annotator's gold accuracy. A prior annotation (from the import) is the vote of an external
rater "prior #N", one rater per position N in the pairs' ``human_annotations`` lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import cast

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Count, QuerySet
from django.utils import timezone

from annotation.agreement.statistics import (
    AlphaLevel,
    Ratings,
    bootstrap_alpha_ci,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_agreement,
    per_annotator,
    unanimous_share,
)
from annotation.core.errors import Conflict, InvalidInput
from annotation.core.report_sections import report_sections
from annotation.core.scales import SCALE_VALUES
from annotation.models import (
    Pair,
    PairStatus,
    PriorAnnotation,
    Project,
    ReportSource,
    Side,
    Vote,
)

# Flags on an annotator (docs/agreement.md, "What it holds"): agreement with the others' consensus
# below this share, a median time per vote below this many seconds, gold accuracy below this.
LOW_AGREEMENT_BELOW = 0.6
TOO_FAST_BELOW_S = 3.0
LOW_GOLD_ACCURACY_BELOW = 0.7
# Tasks and criteria with the most votes that get a section each; a free-form criterion can
# be different on every pair, and a section is several alphas with their intervals.
MAX_GROUPS = 50
HISTORY_POINTS = 20
PRIOR_RATER = "prior #{}"


# Rows read from the database at a time: each chunk becomes a numpy array at once, so the
# Python tuples of a million votes never exist all together.
READ_CHUNK_ROWS = 50_000


def _number_rows(rows: QuerySet, width: int) -> np.ndarray:
    """The rows of a ``values_list`` of ``width`` integer columns as a float array (rows x
    width) with NaN for NULL: exact for any id below 2**53, and no converter runs per row."""
    chunks, iterator = [], rows.iterator(chunk_size=READ_CHUNK_ROWS)
    while chunk := list(islice(iterator, READ_CHUNK_ROWS)):
        chunks.append(np.array(chunk, dtype=float))
    return np.concatenate(chunks) if chunks else np.empty((0, width))


@dataclass(frozen=True)
class _Pairs:
    """The project's pairs as arrays sorted by id, with each one's task and criterion code."""

    ids: np.ndarray
    task: np.ndarray
    criterion: np.ndarray
    is_gold: np.ndarray
    gold_labels: dict[int, str]
    tasks: list[str]
    criteria: list[str]

    def index(self, pair_ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.ids, pair_ids)


def _read_pairs(project: Project) -> _Pairs:
    rows = list(
        Pair.objects.filter(project=project)
        .exclude(status=PairStatus.EXCLUDED)
        .order_by("pk")
        .values_list("pk", "task", "criterion", "is_gold", "gold_label")
    )
    tasks: dict[str, int] = {}
    criteria: dict[str, int] = {}
    task_codes = [tasks.setdefault(row[1], len(tasks)) for row in rows]
    criterion_codes = [criteria.setdefault(row[2], len(criteria)) for row in rows]
    return _Pairs(
        ids=np.array([row[0] for row in rows], dtype=np.int64),
        task=np.array(task_codes, dtype=np.int64),
        criterion=np.array(criterion_codes, dtype=np.int64),
        is_gold=np.array([bool(row[3]) for row in rows], dtype=bool),
        gold_labels={row[0]: row[4] for row in rows if row[3]},
        tasks=list(tasks),
        criteria=list(criteria),
    )


@dataclass(frozen=True)
class _Votes:
    """Votes and prior annotations as parallel arrays. Raters are annotator ids, or -N for
    the external rater "prior #N"; ``ids`` are the rows' primary keys, in the order they
    were given (``from_prior`` tells which table)."""

    ids: np.ndarray
    from_prior: np.ndarray
    pairs: np.ndarray
    raters: np.ndarray
    values: np.ndarray
    times: np.ndarray  # milliseconds, NaN where unknown

    def take(self, rows: np.ndarray) -> _Votes:
        return _Votes(**{name: getattr(self, name)[rows] for name in self.__dataclass_fields__})


def _read_votes(project: Project, source: str) -> _Votes:
    votes = _number_rows(
        Vote.objects.filter(pair__project=project, is_adjudication=False)
        .exclude(pair__status=PairStatus.EXCLUDED)
        .values_list("pk", "pair_id", "annotator_id", "value", "time_on_task_ms")
        if source != ReportSource.PRIOR
        else Vote.objects.none(),
        5,
    )
    priors = _number_rows(
        PriorAnnotation.objects.filter(pair__project=project, value__isnull=False)
        .exclude(pair__status=PairStatus.EXCLUDED)
        .values_list("pk", "pair_id", "position", "value")
        if source != ReportSource.VOTES
        else PriorAnnotation.objects.none(),
        4,
    )
    ints = np.int64
    return _Votes(
        ids=np.concatenate([votes[:, 0], priors[:, 0]]).astype(ints),
        from_prior=np.repeat([False, True], [len(votes), len(priors)]),
        pairs=np.concatenate([votes[:, 1], priors[:, 1]]).astype(ints),
        raters=np.concatenate([votes[:, 2], -(priors[:, 2] + 1)]).astype(ints),
        values=np.concatenate([votes[:, 3], priors[:, 3]]).astype(ints),
        times=np.concatenate([votes[:, 4], np.full(len(priors), np.nan)]),
    )


def _ratings(project: Project, votes: _Votes) -> tuple[Ratings, _Votes]:
    """Ratings of ``votes`` and the votes in the same order (by pair, then rater), so the
    arrays of one line up with the other's."""
    order = np.lexsort((votes.raters, votes.pairs))
    votes = votes.take(order)
    try:
        ratings = Ratings.from_arrays(
            scale=project.scale,
            units=votes.pairs,
            raters=votes.raters,
            values=votes.values,
            time_on_task_ms=votes.times,
        )
    except ValueError as exc:
        raise Conflict(f"The project's votes do not fit its {project.scale} scale: {exc}") from None
    return ratings, votes


def _subset(ratings: Ratings, mask: np.ndarray) -> Ratings:
    """The votes where ``mask`` holds, as Ratings of their own with only the pairs they are
    on: built directly, since the votes are already checked and in order."""
    units = ratings.units[mask]
    first = np.ones(len(units), dtype=bool)
    first[1:] = units[1:] != units[:-1]
    unit_ids = np.asarray(ratings.unit_ids)[units[first]] if len(units) else np.empty(0)
    times = ratings.time_on_task_ms
    return Ratings(
        scale=ratings.scale,
        units=np.cumsum(first) - 1,
        raters=ratings.raters[mask],
        values=ratings.values[mask],
        unit_ids=tuple(unit_ids.tolist()),
        rater_keys=ratings.rater_keys,
        time_on_task_ms=None if times is None else times[mask],
    )


def _number(value: float | None) -> float | None:
    """A figure for JSON: NaN and infinities (no JSON has them) become null."""
    return None if value is None or not math.isfinite(value) else float(value)


def _interval(ci: tuple[float, float] | None) -> list[float | None] | None:
    return None if ci is None else [_number(ci[0]), _number(ci[1])]


def _figures(ratings: Ratings) -> dict:
    """The statistics of one set of votes: what the report holds for the project, a task
    and a criterion."""
    return {
        "votes": len(ratings.values),
        "pairs": ratings.n_units,
        "annotators": int(np.count_nonzero(np.bincount(ratings.raters))),
        "krippendorff_alpha": {
            level.value: _number(krippendorff_alpha(ratings, level)) for level in AlphaLevel
        },
        "alpha_ci95": {
            level.value: _interval(bootstrap_alpha_ci(ratings, level)) for level in AlphaLevel
        },
        "pairwise_agreement": _number(pairwise_agreement(ratings)),
        "unanimous_share": _number(unanimous_share(ratings)),
        "fleiss_kappa": _number(fleiss_kappa(ratings)),
    }


def _by_group(ratings: Ratings, codes: np.ndarray, names: list[str], whole: dict) -> dict:
    """Figures for each group (task or criterion) of votes by ``codes``, the MAX_GROUPS with
    the most votes, most first; a group holding every vote reuses ``whole``."""
    counts = np.bincount(codes, minlength=len(names))
    largest = sorted(np.flatnonzero(counts), key=lambda code: (-counts[code], names[code]))
    return {
        names[code]: (
            whole if counts[code] == len(codes) else _figures(_subset(ratings, codes == code))
        )
        for code in largest[:MAX_GROUPS]
    }


def _flags(
    *, agreement: float | None, median_seconds: float | None, gold: float | None
) -> list[str]:
    flags = []
    if agreement is not None and agreement < LOW_AGREEMENT_BELOW:
        flags.append("low_agreement")
    if median_seconds is not None and median_seconds < TOO_FAST_BELOW_S:
        flags.append("too_fast")
    if gold is not None and gold < LOW_GOLD_ACCURACY_BELOW:
        flags.append("low_gold_accuracy")
    return flags


def _per_annotator(ratings: Ratings, gold: Ratings | None, gold_labels: dict) -> list[dict]:
    """Each rater's figures, with gold accuracy from their votes on gold pairs; raters who
    only voted on gold pairs come last, with no other votes."""
    on_gold = {row.rater: row for row in per_annotator(gold, gold=gold_labels)} if gold else {}
    rows = {row.rater: row for row in per_annotator(ratings)}
    # Raters are integers as _read_votes gives them: annotator ids, or -N for "prior #N".
    keys = cast(list[int], [*ratings.rater_keys, *(key for key in on_gold if key not in rows)])
    usernames = dict(
        get_user_model()
        .objects.filter(pk__in=[key for key in keys if key > 0])
        .values_list("pk", "username")
    )

    def name(key: int) -> str:
        return PRIOR_RATER.format(-key) if key < 0 else usernames.get(key, f"user #{key}")

    result = []
    for key in keys:
        row, gold_row = rows.get(key), on_gold.get(key)
        agreement = _number(row.consensus_agreement) if row else None
        median_seconds = _number(row.median_seconds) if row else None
        gold_accuracy = _number(gold_row.gold_accuracy) if gold_row else None
        kappa = row.kappa if row else {}
        result.append(
            {
                "annotator": name(key),
                "source": "prior" if key < 0 else "vote",
                "votes": row.votes if row else 0,
                "median_seconds": median_seconds,
                "agreement_with_others": agreement,
                "gold_votes": gold_row.gold_votes if gold_row else 0,
                "gold_accuracy": gold_accuracy,
                "cohen_kappa": {name(cast(int, k)): _number(v) for k, v in kappa.items()},
                "flags": _flags(
                    agreement=agreement, median_seconds=median_seconds, gold=gold_accuracy
                ),
            }
        )
    return result


def _history(ratings: Ratings, votes: _Votes) -> list[dict]:
    """Side alpha with its interval over the votes up to each of HISTORY_POINTS points in
    vote order (prior annotations first, at their pair's import, then votes as they came)."""
    count = len(votes.ids)
    if not count:
        return []
    in_order = np.lexsort((votes.ids, ~votes.from_prior))
    rank = np.empty(count, dtype=np.int64)
    rank[in_order] = np.arange(count)
    cuts = np.unique(np.ceil(np.linspace(count / HISTORY_POINTS, count, HISTORY_POINTS)))
    last = [in_order[int(cut) - 1] for cut in cuts]
    times = _created_at(votes.take(np.array(last)))
    points = []
    for cut, at in zip(cuts, times, strict=True):
        prefix = _subset(ratings, rank < cut)
        points.append(
            {
                "at": at.isoformat(),
                "votes": int(cut),
                "alpha_side": _number(krippendorff_alpha(prefix, AlphaLevel.SIDE)),
                "alpha_side_ci95": _interval(bootstrap_alpha_ci(prefix, AlphaLevel.SIDE)),
            }
        )
    return points


def _created_at(votes: _Votes) -> list[datetime]:
    """When each vote was given; a prior annotation, when its pair was imported."""
    vote_ids = votes.ids[~votes.from_prior].tolist()
    prior_ids = votes.ids[votes.from_prior].tolist()
    at = {
        (False, pk): created
        for pk, created in Vote.objects.filter(pk__in=vote_ids).values_list("pk", "created_at")
    }
    at |= {
        (True, pk): created
        for pk, created in PriorAnnotation.objects.filter(pk__in=prior_ids).values_list(
            "pk", "pair__created_at"
        )
    }
    return [
        at[(bool(prior), int(pk))] for prior, pk in zip(votes.from_prior, votes.ids, strict=True)
    ]


def _pairs_by_status(project: Project) -> dict[str, int]:
    counts = dict(
        Pair.objects.filter(project=project)
        .values("status")
        .order_by()
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    return {status: counts.get(status, 0) for status in PairStatus.values}


def check_report_source(source: str) -> str:
    if source not in ReportSource.values:
        raise InvalidInput(
            f"source: must be one of {', '.join(ReportSource.values)} (got {source!r})"
        )
    return source


def agreement_report_build(
    *, project: Project, source: str = ReportSource.ALL, now: datetime | None = None
) -> dict:
    """The agreement report of ``project`` over ``source`` (votes, prior annotations or all),
    as the JSON the API serves (docs/agreement.md, "The report"). ``now`` is when the votes
    are read (the report's ``computed_at``)."""
    check_report_source(source)
    computed_at = now or timezone.now()
    votes = _read_votes(project, source)
    # Read after the votes, so every vote's pair is among them: a pair imported meanwhile has
    # no vote yet here, and pairs are deleted only with their project.
    pairs = _read_pairs(project)
    on_gold = pairs.is_gold[pairs.index(votes.pairs)] if len(votes.ids) else np.zeros(0, bool)
    ratings, counted = _ratings(project, votes.take(np.flatnonzero(~on_gold)))
    gold = _ratings(project, votes.take(np.flatnonzero(on_gold)))[0] if on_gold.any() else None
    whole = _figures(ratings)
    at_pair = pairs.index(np.asarray(ratings.unit_ids, dtype=np.int64))[ratings.units]
    scale_values = SCALE_VALUES[project.scale]
    value_counts = np.bincount(ratings.values, minlength=max(scale_values) + 1)
    return {
        "project": project.slug,
        "source": source,
        "computed_at": computed_at.isoformat(),
        "scale": project.scale,
        "rule": project.consensus_rule,
        **whole,
        "value_distribution": {str(value): int(value_counts[value]) for value in scale_values},
        "pairs_by_status": _pairs_by_status(project),
        "by_task": _by_group(ratings, pairs.task[at_pair], pairs.tasks, whole),
        "by_criterion": _by_group(ratings, pairs.criterion[at_pair], pairs.criteria, whole),
        "per_annotator": _per_annotator(ratings, gold, pairs.gold_labels),
        "history": _history(ratings, counted),
        "reference_labels": reference_comparison(project),
        **report_sections(project=project),
    }


# Rows of the confusion matrix: the consensus label; columns: the reference label.
REFERENCE_LABELS = (Side.A, Side.TIE, Side.B)


def _comparison(pairs: list[tuple[int, str, str]]) -> dict:
    """Share agreeing, Cohen's kappa and the confusion matrix of (pair, consensus,
    reference) rows."""
    confusion: dict[str, dict[str, int]] = {
        str(row): {str(column): 0 for column in REFERENCE_LABELS} for row in REFERENCE_LABELS
    }
    for _, consensus, reference in pairs:
        confusion[consensus][reference] += 1
    agreeing = sum(1 for _, consensus, reference in pairs if consensus == reference)
    return {
        "pairs": len(pairs),
        "agreeing": agreeing,
        "agreement": agreeing / len(pairs) if pairs else None,
        "cohen_kappa": _number(
            cohen_kappa(
                {pk: consensus for pk, consensus, _ in pairs},
                {pk: reference for pk, _, reference in pairs},
            )
        ),
        "confusion": confusion,
    }


def reference_comparison(project: Project) -> dict:
    """The project's human consensus against the reference labels that came with the import
    (MMRB2's ``chosen``, Omni-RewardBench's ``criteria_preference``): over the pairs that
    have both, the share agreeing, Cohen's kappa and the confusion matrix, overall and by
    task (a re-annotation study's figures; docs/agreement.md, "Against the reference
    labels"). Gold pairs are left out."""
    labelled = Pair.objects.filter(project=project, is_gold=False).exclude(prior_label="")
    rows = list(
        labelled.filter(status=PairStatus.CONSENSUS)
        .exclude(consensus_label="")
        .order_by("pk")
        .values_list("pk", "task", "consensus_label", "prior_label")
    )
    by_task: dict[str, list[tuple[int, str, str]]] = {}
    for pk, task, consensus, reference in rows:
        by_task.setdefault(task, []).append((pk, consensus, reference))
    return {
        "with_reference": labelled.count(),
        **_comparison([(pk, consensus, reference) for pk, _, consensus, reference in rows]),
        "by_task": {task: _comparison(pairs) for task, pairs in sorted(by_task.items())},
    }
