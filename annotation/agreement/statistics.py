"""Agreement statistics, as pure functions over numpy arrays.

Votes are ``Ratings``: parallel arrays of unit (pair) index, rater index and canonical value,
sorted by unit, so a million votes are a few megabytes and every statistic is vectorised.
Definitions, which votes count and the edge cases of each rule: ``docs/agreement.md``.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import krippendorff
import numpy as np

from annotation.core.scales import (
    MIN_SHARED_PAIRS_FOR_KAPPA,
    SCALE_VALUES,
    SIDE_CODES,
    SIDES,
    UNSURE_VALUES,
    check_choice,
)
from annotation.models import Scale

# Side codes, each an index into SIDES.
_B, _TIE, _A = range(len(SIDES))

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


class AlphaLevel(enum.StrEnum):
    """Krippendorff's levels: the first three on the scale's raw values, ``side`` nominal on
    the side each vote leans to."""

    NOMINAL = "nominal"
    ORDINAL = "ordinal"
    INTERVAL = "interval"
    SIDE = "side"


# The ``krippendorff`` package's level of measurement for each AlphaLevel.
_Measure = Literal["nominal", "ordinal", "interval"]
_MEASURE: dict[str, _Measure] = {
    AlphaLevel.NOMINAL: "nominal",
    AlphaLevel.ORDINAL: "ordinal",
    AlphaLevel.INTERVAL: "interval",
    AlphaLevel.SIDE: "nominal",
}


def _lookup_table(mapping: Mapping[int, int], *, missing: int) -> np.ndarray:
    """An array indexed by canonical value (0..6) that maps each value through ``mapping``."""
    table = np.full(max(SCALE_VALUES[Scale.LIKERT6]) + 1, missing, dtype=np.int64)
    for value, mapped in mapping.items():
        table[value] = mapped
    return table


def _off_scale_rows(values: np.ndarray, allowed: tuple[int, ...]) -> np.ndarray | list[int]:
    """Rows whose value is not one of ``allowed`` (integers only: no floats, no booleans)."""
    if values.dtype.kind in "iu":
        return np.flatnonzero(~np.isin(values, allowed))
    return [
        row
        for row, value in enumerate(values)
        if isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or value not in allowed
    ]


@dataclass(frozen=True, eq=False)
class Ratings:
    """Votes as parallel arrays sorted by (unit, rater): rater ``raters[i]`` gave
    ``values[i]`` to unit ``units[i]``; indices point into ``unit_ids`` and ``rater_keys``.
    Build with ``from_arrays`` or ``from_tuples``, which check and sort."""

    scale: str
    units: np.ndarray
    raters: np.ndarray
    values: np.ndarray
    unit_ids: Sequence[Hashable]
    rater_keys: Sequence[Hashable]
    time_on_task_ms: np.ndarray | None = None  # float, NaN where unknown

    @classmethod
    def from_arrays(
        cls,
        *,
        scale: str,
        units: np.ndarray,
        raters: np.ndarray,
        values: np.ndarray,
        time_on_task_ms: np.ndarray | None = None,
    ) -> Ratings:
        """From parallel arrays of pair ids and rater ids (any sortable dtype) and values."""
        unit_ids, unit_codes = np.unique(np.asarray(units), return_inverse=True)
        rater_keys, rater_codes = np.unique(np.asarray(raters), return_inverse=True)
        return cls._build(
            scale=scale,
            units=unit_codes,
            unit_ids=tuple(unit_ids.tolist()),
            raters=rater_codes,
            rater_keys=tuple(rater_keys.tolist()),
            values=np.asarray(values),
            time_on_task_ms=time_on_task_ms,
        )

    @classmethod
    def from_tuples(
        cls,
        rows: Iterable[tuple[Hashable, Hashable, int]],
        *,
        scale: str,
        time_on_task_ms: Iterable[float | None] | None = None,
    ) -> Ratings:
        """From ``(pair_id, rater_key, value)`` rows; ids may be any hashable, so prior
        annotations can join votes as raters of their own (``("prior", 0)``)."""
        unit_index: dict[Hashable, int] = {}
        rater_index: dict[Hashable, int] = {}
        units, raters, values = [], [], []
        for pair_id, rater_key, value in rows:
            units.append(unit_index.setdefault(pair_id, len(unit_index)))
            raters.append(rater_index.setdefault(rater_key, len(rater_index)))
            values.append(value)
        times = None
        if time_on_task_ms is not None:
            times = np.array([np.nan if t is None else t for t in time_on_task_ms], dtype=float)
        return cls._build(
            scale=scale,
            units=np.array(units, dtype=np.int64),
            unit_ids=tuple(unit_index),
            raters=np.array(raters, dtype=np.int64),
            rater_keys=tuple(rater_index),
            values=np.array(values, dtype=object),
            time_on_task_ms=times,
        )

    @classmethod
    def _build(
        cls,
        *,
        scale: str,
        units: np.ndarray,
        unit_ids: Sequence[Hashable],
        raters: np.ndarray,
        rater_keys: Sequence[Hashable],
        values: np.ndarray,
        time_on_task_ms: np.ndarray | None,
    ) -> Ratings:
        check_choice("scale", scale, Scale.values)
        if not (len(units) == len(raters) == len(values)):
            raise ValueError(
                "units, raters, values: must have the same length "
                f"(got {len(units)}, {len(raters)}, {len(values)})"
            )
        allowed = SCALE_VALUES[scale]
        bad = _off_scale_rows(values, allowed)
        if len(bad):
            row = int(bad[0])
            value = values[row : row + 1].tolist()[0]  # a Python object, whatever the dtype
            raise ValueError(
                f"value: {value!r} in row {row} is not on the {scale} scale "
                f"(allowed: {', '.join(map(str, allowed))})"
            )
        if time_on_task_ms is not None:
            time_on_task_ms = np.asarray(time_on_task_ms, dtype=float)
            if len(time_on_task_ms) != len(values):
                raise ValueError(
                    f"time_on_task_ms: must have one entry per vote "
                    f"(got {len(time_on_task_ms)} for {len(values)} votes)"
                )
            if (time_on_task_ms < 0).any():
                row = int(np.flatnonzero(time_on_task_ms < 0)[0])
                raise ValueError(f"time_on_task_ms: negative in row {row}")
        order = np.lexsort((raters, units))
        units, raters = units[order], raters[order]
        twice = np.flatnonzero((units[1:] == units[:-1]) & (raters[1:] == raters[:-1]))
        if len(twice):
            first, second = sorted(order[twice[0] : twice[0] + 2])
            raise ValueError(
                f"rater: {rater_keys[raters[twice[0]]]!r} rated pair "
                f"{unit_ids[units[twice[0]]]!r} twice (rows {first} and {second})"
            )
        return cls(
            scale=scale,
            units=units,
            raters=raters,
            values=values[order].astype(np.int8),
            unit_ids=unit_ids,
            rater_keys=rater_keys,
            time_on_task_ms=None if time_on_task_ms is None else time_on_task_ms[order],
        )

    @property
    def n_units(self) -> int:
        return len(self.unit_ids)

    @property
    def n_raters(self) -> int:
        return len(self.rater_keys)

    @cached_property
    def sides(self) -> np.ndarray:
        """Side code (an index into ``SIDES``) of each vote."""
        return _lookup_table(SIDE_CODES[self.scale], missing=-1)[self.values]

    @cached_property
    def per_unit(self) -> np.ndarray:
        """Votes per unit."""
        return np.bincount(self.units, minlength=self.n_units)

    @cached_property
    def value_counts(self) -> np.ndarray:
        """(units x scale values): how many raters gave each unit each raw value."""
        allowed = SCALE_VALUES[self.scale]
        codes = _lookup_table({v: i for i, v in enumerate(allowed)}, missing=-1)[self.values]
        return self._counts(codes, len(allowed))

    @cached_property
    def side_counts(self) -> np.ndarray:
        """(units x SIDES): how many votes on each unit lean to each side."""
        return self._counts(self.sides, len(SIDES))

    def _counts(self, codes: np.ndarray, width: int) -> np.ndarray:
        flat = self.units.astype(np.int64) * width + codes
        return np.bincount(flat, minlength=self.n_units * width).reshape(self.n_units, width)


def _alpha_inputs(ratings: Ratings, level: str) -> tuple[np.ndarray, np.ndarray, _Measure]:
    """(value counts, value domain, the package's level of measurement) for ``level``."""
    check_choice("level", level, AlphaLevel)
    if level == AlphaLevel.SIDE:
        return ratings.side_counts, np.arange(len(SIDES)), _MEASURE[level]
    return ratings.value_counts, np.array(SCALE_VALUES[ratings.scale]), _MEASURE[level]


def _pairable(value_counts: np.ndarray) -> np.ndarray | None:
    """The units with two or more values, or None when they hold fewer than two distinct
    values (no unit to pair, or no variation: alpha is undefined)."""
    pairable = value_counts[value_counts.sum(axis=1) >= 2]
    return pairable if np.count_nonzero(pairable.sum(axis=0)) >= 2 else None


def krippendorff_alpha(ratings: Ratings, level: str) -> float | None:
    """Krippendorff's alpha by the ``krippendorff`` package, from value counts (units x
    values); None where it is undefined."""
    value_counts, domain, measure = _alpha_inputs(ratings, level)
    pairable = _pairable(value_counts)
    if pairable is None:
        return None
    return float(
        krippendorff.alpha(value_counts=pairable, value_domain=domain, level_of_measurement=measure)
    )


def _distinct_rows(value_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, how often each occurs): a column at a time, re-numbering after each,
    so the combined codes never overflow; far faster than ``np.unique(axis=0)``."""
    codes = np.zeros(len(value_counts), dtype=np.int64)
    for column in value_counts.T:
        _, codes = np.unique(codes * (int(column.max()) + 1) + column, return_inverse=True)
    _, first, multiplicity = np.unique(codes, return_index=True, return_counts=True)
    return value_counts[first], multiplicity


def _coincidences(value_counts: np.ndarray) -> np.ndarray:
    """Krippendorff's coincidence matrix of each unit (units x V x V): each ordered pair of
    values within a unit, weighted 1 / (m_u - 1); zero for units with fewer than two."""
    m = value_counts.sum(axis=1)
    pairs = value_counts[:, :, None] * value_counts[:, None, :]
    pairs = pairs - value_counts[:, :, None] * np.eye(value_counts.shape[1], dtype=np.int64)
    weight = np.divide(1.0, m - 1, out=np.zeros(len(m)), where=m >= 2)
    return pairs * weight[:, None, None]


def _alpha_from_coincidences(o: np.ndarray, domain: np.ndarray, measure: _Measure) -> np.ndarray:
    """Alpha for each coincidence matrix in ``o`` (... x V x V), as the package computes it
    (1 - observed / expected disagreement); NaN where undefined."""
    n_v = o.sum(axis=-1)
    n = n_v.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = n_v[..., :, None] * n_v[..., None, :] - n_v[..., None, :] * np.eye(len(domain))
        expected = expected / (n - 1)[..., None, None]
        if measure == AlphaLevel.NOMINAL:
            distance = 1.0 - np.eye(len(domain))
        elif measure == AlphaLevel.INTERVAL:
            distance = (domain[:, None] - domain[None, :]).astype(float) ** 2
        else:  # ordinal: the marginals between the two ranks, less half of each end
            cumulative = np.cumsum(n_v, axis=-1)
            index = np.arange(len(domain))
            low = np.minimum(index[:, None], index[None, :])
            high = np.maximum(index[:, None], index[None, :])
            between = cumulative[..., high] - cumulative[..., low] + n_v[..., low]
            distance = (between - (n_v[..., low] + n_v[..., high]) / 2) ** 2
        return 1.0 - (o * distance).sum(axis=(-2, -1)) / (expected * distance).sum(axis=(-2, -1))


def bootstrap_alpha_ci(
    ratings: Ratings,
    level: str,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile 95% interval of alpha over ``resamples`` resamples of the units (pairs)
    with replacement; the same seed gives the same interval. None where alpha is undefined.

    Units with the same value counts add the same coincidences, so a resample is drawn as how
    often each distinct row occurs in it (multinomial over the rows' shares): the same
    distribution as drawing unit indices, at a cost independent of the number of units."""
    if resamples < 1:
        raise ValueError(f"resamples: must be at least 1 (got {resamples})")
    value_counts, domain, measure = _alpha_inputs(ratings, level)
    if _pairable(value_counts) is None:
        return None
    rows, multiplicity = _distinct_rows(value_counts)
    units = int(multiplicity.sum())
    draws = np.random.default_rng(seed).multinomial(units, multiplicity / units, size=resamples)
    per_row = _coincidences(rows).reshape(len(rows), -1)
    o = (draws @ per_row).reshape(resamples, len(domain), len(domain))
    alphas = _alpha_from_coincidences(o, domain, measure)
    alphas = alphas[np.isfinite(alphas)]
    if not len(alphas):
        return None
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(alphas, [tail, 1 - tail])
    return float(low), float(high)


def pairwise_agreement(ratings: Ratings) -> float | None:
    """MMRB2's pairwise agreement: of all pairs of votes on the same unit, the share that
    favour the same side, unsure votes left out; None without two sure votes on one unit."""
    sure = ~np.isin(ratings.values, tuple(UNSURE_VALUES[ratings.scale]))
    a = np.bincount(ratings.units[sure & (ratings.sides == _A)], minlength=ratings.n_units)
    b = np.bincount(ratings.units[sure & (ratings.sides == _B)], minlength=ratings.n_units)
    pairs = _pairs_of(a + b).sum()
    return float((_pairs_of(a) + _pairs_of(b)).sum() / pairs) if pairs else None


def _pairs_of(counts: np.ndarray) -> np.ndarray:
    return counts * (counts - 1) // 2


def unanimous_share(ratings: Ratings) -> float | None:
    """The share of units with two or more votes whose votes all lean to one side (what the
    ``unanimous`` rule resolves); None without such units."""
    rated = ratings.per_unit >= 2
    if not rated.any():
        return None
    counts = ratings.side_counts[rated]
    return float((counts.max(axis=1) == ratings.per_unit[rated]).mean())


def fleiss_kappa(ratings: Ratings) -> float | None:
    """Fleiss' kappa on sides; None unless every unit has the same number (>= 2) of votes,
    or when chance agreement is already perfect (every vote on one side)."""
    n = ratings.per_unit
    if not len(n) or n.min() != n.max() or n[0] < 2:
        return None
    counts = ratings.side_counts
    per_unit = ((counts * counts).sum(axis=1) - n[0]) / (n[0] * (n[0] - 1))
    shares = counts.sum(axis=0) / counts.sum()
    chance = float((shares * shares).sum())
    if chance == 1:
        return None
    return (float(per_unit.mean()) - chance) / (1 - chance)


def _kappa(confusion: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each confusion matrix (... x C x C); NaN where chance agreement is 1."""
    total = confusion.sum(axis=(-2, -1))
    observed = np.trace(confusion, axis1=-2, axis2=-1) / total
    chance = (confusion.sum(axis=-1) * confusion.sum(axis=-2)).sum(axis=-1) / total**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)


def _kappa_or_none(value: np.ndarray | float) -> float | None:
    return None if np.isnan(value) else float(value)


def cohen_kappa(a: Mapping[Hashable, Hashable], b: Mapping[Hashable, Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels (unit -> label) over the units both labelled;
    None when they share none or chance agreement is perfect."""
    shared = a.keys() & b.keys()
    if not shared:
        return None
    labels = {label: i for i, label in enumerate({a[u] for u in shared} | {b[u] for u in shared})}
    confusion = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for unit in shared:
        confusion[labels[a[unit]], labels[b[unit]]] += 1
    return _kappa_or_none(_kappa(confusion))


@dataclass(frozen=True)
class AnnotatorAgreement:
    rater: Hashable
    votes: int
    median_seconds: float | None
    # Share of this rater's votes on the side a strict majority of the others took, over the
    # ``consensus_votes`` votes where the others had one (leave-one-out).
    consensus_agreement: float | None
    consensus_votes: int
    # Cohen's kappa on sides with each rater sharing >= MIN_SHARED_PAIRS_FOR_KAPPA units.
    kappa: dict[Hashable, float | None]
    gold_votes: int
    gold_accuracy: float | None


def per_annotator(
    ratings: Ratings, *, gold: Mapping[Hashable, str] | None = None
) -> list[AnnotatorAgreement]:
    """Each rater's votes, median seconds per vote, agreement with the others' consensus,
    kappa with frequent partners, and accuracy on ``gold`` (pair id -> side) pairs."""
    votes = np.bincount(ratings.raters, minlength=ratings.n_raters)
    medians = _median_seconds(ratings)
    agreed, with_consensus = _leave_one_out(ratings)
    gold_correct, gold_votes = _gold(ratings, gold or {})
    kappas = _partner_kappas(ratings)
    return [
        AnnotatorAgreement(
            rater=key,
            votes=int(votes[r]),
            median_seconds=None if np.isnan(medians[r]) else float(medians[r]),
            consensus_agreement=_share(agreed[r], with_consensus[r]),
            consensus_votes=int(with_consensus[r]),
            kappa=kappas.get(r, {}),
            gold_votes=int(gold_votes[r]),
            gold_accuracy=_share(gold_correct[r], gold_votes[r]),
        )
        for r, key in enumerate(ratings.rater_keys)
    ]


def _share(part: int, whole: int) -> float | None:
    return float(part / whole) if whole else None


def _per_rater(ratings: Ratings, mask: np.ndarray) -> np.ndarray:
    return np.bincount(ratings.raters[mask], minlength=ratings.n_raters)


def _median_seconds(ratings: Ratings) -> np.ndarray:
    """Median seconds per vote of each rater over the votes with a time; NaN without one."""
    medians = np.full(ratings.n_raters, np.nan)
    if ratings.time_on_task_ms is None:
        return medians
    known = ~np.isnan(ratings.time_on_task_ms)
    raters, times = ratings.raters[known], ratings.time_on_task_ms[known]
    order = np.lexsort((times, raters))
    times = times[order]
    counts = np.bincount(raters, minlength=ratings.n_raters)
    starts = np.cumsum(counts) - counts
    timed = counts > 0
    low = starts[timed] + (counts[timed] - 1) // 2
    high = starts[timed] + counts[timed] // 2
    medians[timed] = (times[low] + times[high]) / 2 / 1000
    return medians


def _leave_one_out(ratings: Ratings) -> tuple[np.ndarray, np.ndarray]:
    """Per rater: votes on the side held by a strict majority of the other votes on the same
    unit, and votes where the others had such a majority."""
    others = ratings.side_counts[ratings.units]
    others[np.arange(len(others)), ratings.sides] -= 1
    total = ratings.per_unit[ratings.units] - 1
    has_majority = others.max(axis=1) * 2 > total
    agrees = others[np.arange(len(others)), ratings.sides] * 2 > total
    return _per_rater(ratings, agrees), _per_rater(ratings, has_majority)


def _gold(ratings: Ratings, gold: Mapping[Hashable, str]) -> tuple[np.ndarray, np.ndarray]:
    """Per rater: correct votes on gold units, and votes on gold units."""
    labels = np.full(ratings.n_units, -1)
    for unit, unit_id in enumerate(ratings.unit_ids):
        label = gold.get(unit_id)
        if label is not None:
            check_choice(f"gold[{unit_id!r}]", label, SIDES)
            labels[unit] = SIDES.index(label)
    expected = labels[ratings.units]
    on_gold = expected >= 0
    return _per_rater(ratings, on_gold & (ratings.sides == expected)), _per_rater(ratings, on_gold)


def _partner_kappas(ratings: Ratings) -> dict[int, dict[Hashable, float | None]]:
    """Cohen's kappa on sides for every two raters sharing enough units, both ways round."""
    firsts, seconds = [], []
    # Sorted by (unit, rater): votes k apart on the same unit pair a lower rater with a higher.
    for k in range(1, int(ratings.per_unit.max(initial=0))):
        same = np.flatnonzero(ratings.units[:-k] == ratings.units[k:])
        firsts.append(same)
        seconds.append(same + k)
    if not firsts:
        return {}
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    couple = ratings.raters[first].astype(np.int64) * ratings.n_raters + ratings.raters[second]
    couples, which, shared = np.unique(couple, return_inverse=True, return_counts=True)
    cells = which * len(SIDES) ** 2 + ratings.sides[first] * len(SIDES) + ratings.sides[second]
    confusion = np.bincount(cells, minlength=len(couples) * len(SIDES) ** 2)
    kappas = _kappa(confusion.reshape(len(couples), len(SIDES), len(SIDES)))
    result: dict[int, dict[Hashable, float | None]] = {}
    for index in np.flatnonzero(shared >= MIN_SHARED_PAIRS_FOR_KAPPA):
        low, high = divmod(int(couples[index]), ratings.n_raters)
        kappa = _kappa_or_none(kappas[index])
        result.setdefault(low, {})[ratings.rater_keys[high]] = kappa
        result.setdefault(high, {})[ratings.rater_keys[low]] = kappa
    return result
