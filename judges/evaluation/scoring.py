"""Scoring a judge against labelled pairs, as pure functions over plain data
(docs/judges-evaluation.md).

A target item is a pair with its human label (``A``, ``B`` or ``tie``); an answer is what the
judge said in one order: a canonical side, or ``""`` when it gave no vote (unparseable, error,
abstain or never asked), and optionally a signed score (A minus B). Every share comes with a
seeded bootstrap 95% interval over pairs.

- **Dual accuracy** (MMRB2's ``evaluate/compute_scores/compute_accuracy.py``): both orders of
  every pair labelled A or B are scored; an order with no answer leaves the denominator, a tie
  answer counts as wrong. **Strict dual accuracy**: the same, a missing answer counting as
  wrong.
- **Accuracy without ties / with ties** (Omni-RewardBench's ``evaluation_experiments/
  run_exp.py`` and ``run_exp_t2a.py``): one prediction per pair, the judge's answer in the
  order the task's released script shows the pair (``judges.prompts.omni_order``: AB, response1
  first, for every task but text-to-audio, whose script shows response2 first: BA);
  no answer is wrong; without ties over the pairs labelled A or B (a tie prediction is wrong),
  with ties over every labelled pair (a tie prediction on a tie label is right).
- Beside each accuracy, ``answered`` (the share of its answers the judge gave) and
  ``on_answered`` (the accuracy over those only), so abstentions never hide.
- **Tie-calibrated accuracy**: for judges whose every vote carries a score, the pair's score
  is the mean over its orders; a pair is called a tie when |score| <= margin; the margin is swept
  over 0 and every |score| seen and the best accuracy with ties is reported, smallest margin first.
- **Position consistency**: among pairs with a vote in both orders, the share where both name
  the same side; **first shown**: among A/B votes, the share that chose the response shown first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from judges.prompts import omni_order

ORDERS = ("AB", "BA")
LABELS = ("A", "B", "tie")
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
MAX_SEED = 2**31 - 1  # what the evaluation's seed column holds on every database
NO_CRITERION = "(no criterion)"
# Resamples drawn per numpy call: bounds the index matrix to CHUNK x pairs.
_CHUNK = 100
_SIGN = {"A": 1, "B": -1, "tie": 0}
_NONE = 2  # a pair prediction when no order gave a vote


@dataclass(frozen=True)
class TargetItem:
    """A labelled pair: the human label and what the breakdowns group by."""

    pair_id: int
    external_id: str
    task: str
    criterion: str
    label: str  # "A", "B" or "tie"
    same_model: bool

    def as_list(self) -> list:
        return [
            self.pair_id,
            self.external_id,
            self.task,
            self.criterion,
            self.label,
            self.same_model,
        ]

    @classmethod
    def from_list(cls, values: list) -> TargetItem:
        pair_id, external_id, task, criterion, label, same_model = values
        return cls(int(pair_id), str(external_id), task, criterion, label, bool(same_model))


@dataclass(frozen=True)
class Answer:
    """A judge's answer in one order: ``side`` is "" when it gave no vote."""

    side: str
    score: float | None = None


def signed_score(side: str, confidence: float | None, margin: float | None) -> float | None:
    """A vote's score, A minus B: the judge's own ``margin`` when it gave one, else its
    confidence signed by the side (0 for a tie); None without either."""
    if margin is not None:
        return float(margin)
    if confidence is None or side not in _SIGN:
        return None
    return _SIGN[side] * float(confidence)


@dataclass
class _Arrays:
    """Per-pair counts: each metric is sum(hits) / sum(weights) over the pairs."""

    dual: np.ndarray
    dual_answered: np.ndarray
    dual_expected: np.ndarray
    without_ties: np.ndarray
    without_ties_answered: np.ndarray
    without_ties_w: np.ndarray
    with_ties: np.ndarray
    with_ties_answered: np.ndarray
    consistent: np.ndarray
    consistent_w: np.ndarray
    first: np.ndarray
    first_w: np.ndarray

    def take(self, index: np.ndarray) -> _Arrays:
        return _Arrays(*(getattr(self, name)[index] for name in self.__dataclass_fields__))


@dataclass(frozen=True)
class _Metric:
    """A share: ``hits`` over ``weights`` (None: one per pair); an accuracy also names the
    answers given (``answered``) out of those it expects (``expected``; None: one per pair)."""

    name: str
    hits: str
    weights: str | None
    answered: str | None = None
    expected: str | None = None


_METRICS = (
    # MMRB2: an order without an answer leaves the denominator.
    _Metric("dual_accuracy", "dual", "dual_answered", "dual_answered", "dual_expected"),
    # The stricter figure: every order of an A/B pair counts, a missing answer is wrong.
    _Metric("dual_accuracy_strict", "dual", "dual_expected", "dual_answered", "dual_expected"),
    _Metric(
        "accuracy_without_ties",
        "without_ties",
        "without_ties_w",
        "without_ties_answered",
        "without_ties_w",
    ),
    _Metric("accuracy_with_ties", "with_ties", None, "with_ties_answered", None),
    _Metric("position_consistency", "consistent", "consistent_w"),
    _Metric("first_shown_share", "first", "first_w"),
)


def _arrays(items: list[TargetItem], answers: Mapping[tuple[int, str], Answer]) -> _Arrays:
    n = len(items)
    label = np.array([_SIGN[item.label] for item in items], dtype=np.int8)
    sides = np.full((n, 2), _NONE, dtype=np.int8)
    for i, item in enumerate(items):
        for j, order in enumerate(ORDERS):
            answer = answers.get((item.pair_id, order))
            if answer is not None and answer.side in _SIGN:
                sides[i, j] = _SIGN[answer.side]
    voted = sides != _NONE
    decisive = label != 0
    dual = ((sides == label[:, None]) & decisive[:, None]).sum(axis=1)
    # Omni-RewardBench asks once per pair, in the order its task's script shows it: that
    # order's answer is the pair's prediction (BA for text-to-audio, AB for the rest).
    column = np.array([ORDERS.index(omni_order(item.task)) for item in items], dtype=np.intp)
    rows = np.arange(n)
    prediction = sides[rows, column]
    predicted = voted[rows, column]
    both = voted.all(axis=1)
    # The response shown first is A in order AB (a vote of +1) and B in order BA (-1).
    first_sign = np.array([1, -1], dtype=np.int8)
    ab_votes = voted & (sides != 0)
    return _Arrays(
        dual=dual.astype(np.int32),
        dual_answered=np.where(decisive, voted.sum(axis=1), 0).astype(np.int32),
        dual_expected=np.where(decisive, 2, 0).astype(np.int32),
        without_ties=((prediction == label) & decisive).astype(np.int32),
        without_ties_answered=(predicted & decisive).astype(np.int32),
        without_ties_w=decisive.astype(np.int32),
        with_ties=(prediction == label).astype(np.int32),
        with_ties_answered=predicted.astype(np.int32),
        consistent=(both & (sides[:, 0] == sides[:, 1])).astype(np.int32),
        consistent_w=both.astype(np.int32),
        first=(ab_votes & (sides == first_sign)).sum(axis=1).astype(np.int32),
        first_w=ab_votes.sum(axis=1).astype(np.int32),
    )


def _total(arrays: _Arrays, name: str | None) -> int:
    return int(getattr(arrays, name).sum()) if name else len(arrays.dual)


def _metrics(arrays: _Arrays, *, resamples: int, rng: np.random.Generator) -> dict:
    """Every metric with its n and bootstrap interval (pairs resampled with replacement);
    accuracies also with the share answered and the accuracy on the answers given."""
    n = len(arrays.dual)
    out: dict = {}
    draws: dict[str, list[np.ndarray]] = defaultdict(list)
    if n and resamples:
        for start in range(0, resamples, _CHUNK):
            index = rng.integers(0, n, size=(min(_CHUNK, resamples - start), n))
            for metric in _METRICS:
                h = getattr(arrays, metric.hits)[index].sum(axis=1)
                w = (
                    getattr(arrays, metric.weights)[index].sum(axis=1)
                    if metric.weights
                    else np.full(len(h), n)
                )
                with np.errstate(invalid="ignore", divide="ignore"):
                    draws[metric.name].append(np.where(w > 0, h / np.maximum(w, 1), np.nan))
    for metric in _METRICS:
        hits = int(getattr(arrays, metric.hits).sum())
        total = _total(arrays, metric.weights)
        value = hits / total if total else None
        low = high = None
        if value is not None and draws[metric.name]:
            sample = np.concatenate(draws[metric.name])
            sample = sample[~np.isnan(sample)]
            if len(sample):
                low, high = (float(x) for x in np.percentile(sample, [2.5, 97.5]))
        entry: dict = {"value": value, "n": total, "low": low, "high": high}
        if metric.answered:
            answered = _total(arrays, metric.answered)
            expected = _total(arrays, metric.expected)
            entry["answered"] = answered / expected if expected else None
            entry["answered_n"] = answered
            entry["on_answered"] = hits / answered if answered else None
        out[metric.name] = entry
    out["pairs"] = n
    return out


def tie_calibrated(
    items: list[TargetItem], answers: Mapping[tuple[int, str], Answer]
) -> dict | None:
    """The best accuracy with ties when pairs whose mean score lies within a margin of 0 are
    called ties, and that margin (the smallest that reaches it); None unless every vote has
    a score. Pairs without any vote count as wrong."""
    scores: list[float | None] = []
    for item in items:
        votes = [
            a
            for order in ORDERS
            if (a := answers.get((item.pair_id, order))) is not None and a.side in _SIGN
        ]
        given = [a.score for a in votes if a.score is not None]
        if len(given) < len(votes):
            return None
        scores.append(float(np.mean(given)) if given else None)
    if not items or all(s is None for s in scores):
        return None
    label = np.array([_SIGN[item.label] for item in items])
    known = np.array([s is not None for s in scores])
    score = np.array([s if s is not None else 0.0 for s in scores])
    size = np.abs(score)
    candidates = np.unique(np.concatenate([[0.0], size[known]]))
    tie_sizes = np.sort(size[known & (label == 0)])
    right_side = known & (label != 0) & (np.sign(score) == label)
    right_sizes = np.sort(size[right_side])
    ties_right = np.searchsorted(tie_sizes, candidates, side="right")
    sides_right = len(right_sizes) - np.searchsorted(right_sizes, candidates, side="right")
    correct = ties_right + sides_right
    best = int(np.argmax(correct))
    return {
        "margin": float(candidates[best]),
        "accuracy": float(correct[best]) / len(items),
        "n": len(items),
        "margins_tried": len(candidates),
    }


def _groups(items: list[TargetItem], key: Callable[[TargetItem], str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[key(item)].append(i)
    return dict(sorted(groups.items()))


BREAKDOWNS: dict[str, Callable[[TargetItem], str]] = {
    "by_task": lambda item: item.task or "(no task)",
    "by_criterion": lambda item: item.criterion or NO_CRITERION,
    "by_model_pair": lambda item: "same model" if item.same_model else "different models",
}


def evaluate(
    items: Iterable[TargetItem],
    answers: Mapping[tuple[int, str], Answer],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict:
    """The evaluation report: overall metrics, the breakdowns, tie calibration and counts.
    The same items, answers and seed always give the same report."""
    items = list(items)
    arrays = _arrays(items, answers)
    rng = np.random.default_rng(seed)
    votes = sum(
        1
        for item in items
        for order in ORDERS
        if (a := answers.get((item.pair_id, order))) is not None and a.side in _SIGN
    )
    expected = len(items) * len(ORDERS)
    report: dict = {
        "pairs": len(items),
        "labels": {label: sum(1 for item in items if item.label == label) for label in LABELS},
        "answers": {
            "expected": expected,
            "votes": votes,
            "answered": votes / expected if expected else None,
        },
        "overall": _metrics(arrays, resamples=resamples, rng=rng),
        "tie_calibrated": tie_calibrated(items, answers),
        "bootstrap": {"resamples": resamples, "seed": seed},
    }
    for number, (name, key) in enumerate(BREAKDOWNS.items(), start=1):
        report[name] = {
            group: _metrics(
                arrays.take(np.array(index)),
                resamples=resamples,
                rng=np.random.default_rng([seed, number, position]),
            )
            for position, (group, index) in enumerate(_groups(items, key).items())
        }
    return report
