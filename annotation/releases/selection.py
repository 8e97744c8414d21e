"""A release's selection: which decided pairs go in and how they are split
(docs/releases.md, "Selection"). ``check_selection`` turns user input (a form, the API, the
command line) into a ``Selection`` or an ``InvalidInput`` naming the field."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from annotation.core.errors import InvalidInput

SPLIT_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_SPLITS = 8
MAX_FILTER_VALUES = 200
DEFAULT_SPLITS: tuple[tuple[str, float], ...] = (("test", 1.0),)
# Ratios are given in decimal (0.8, 0.1, 0.1) and must add up to 1 within this.
RATIO_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Split:
    name: str
    ratio: float


@dataclass(frozen=True)
class Selection:
    """Which pairs a release holds; ``as_json()`` is what the release stores."""

    include_consensus: bool = True
    include_adjudicated: bool = True
    include_ties: bool = False
    include_ensemble: bool = False
    # The pairs' imported reference labels (Pair.prior_label: MMRB2's chosen,
    # Omni-RewardBench's criteria_preference) instead of Arbiter's decisions: every pair with
    # one, whatever its status; the include_* sources do not apply.
    reference_labels: bool = False
    # The media files as imported (metadata and all) instead of their served copies, stripped
    # of it (docs/releases.md, "Media files"); a choice made when the release is created.
    original_media: bool = False
    tasks: tuple[str, ...] = ()
    criteria: tuple[str, ...] = ()
    min_agreement: float | None = None
    splits: tuple[Split, ...] = field(
        default_factory=lambda: tuple(Split(name, ratio) for name, ratio in DEFAULT_SPLITS)
    )
    seed: int = 0

    def as_json(self) -> dict[str, Any]:
        stored = {
            "include_consensus": self.include_consensus,
            "include_adjudicated": self.include_adjudicated,
            "include_ties": self.include_ties,
            "include_ensemble": self.include_ensemble,
            "tasks": list(self.tasks),
            "criteria": list(self.criteria),
            "min_agreement": self.min_agreement,
            "splits": [{"name": s.name, "ratio": s.ratio} for s in self.splits],
            "seed": self.seed,
        }
        if self.reference_labels:
            # Only when set: a release built before the option stores (and rebuilds to)
            # the same selection as it always did.
            stored["reference_labels"] = True
        if self.original_media:
            stored["original_media"] = True
        return stored

    @property
    def split_names(self) -> tuple[str, ...]:
        return tuple(split.name for split in self.splits)

    def split_of(self, prompt_key: str) -> str:
        """The split of every pair on this prompt: a point in [0, 1) drawn from the seed and
        the prompt's id, so a prompt keeps its split in every release with the same splits
        and seed, however many other pairs come and go."""
        digest = hashlib.sha256(f"{self.seed}:{prompt_key}".encode()).digest()
        point = int.from_bytes(digest[:8], "big") / 2**64
        for bound, name in _bounds(self.splits):
            if point < bound:
                return name
        return self.splits[-1].name


@cache
def _bounds(splits: tuple[Split, ...]) -> tuple[tuple[float, str], ...]:
    """Each split's upper bound in [0, 1): the ratios added up in order (a build draws a
    split for every pair)."""
    bounds = []
    cumulative = 0.0
    for split in splits:
        cumulative += split.ratio
        bounds.append((cumulative, split.name))
    return tuple(bounds)


_FIELDS = set(Selection.__dataclass_fields__)


def selection_sources(selection: Selection) -> list[str]:
    """The kinds of decided pairs the selection takes: consensus, adjudicated, ensemble-easy."""
    return [
        name
        for name, included in (
            ("consensus", selection.include_consensus),
            ("adjudicated", selection.include_adjudicated),
            ("ensemble-easy", selection.include_ensemble),
        )
        if included
    ]


def describe_selection(selection: Selection) -> str:
    """The selection's sources and filters in words, for a refusal that names them
    ("consensus and adjudicated pairs, ties left out, tasks: t2i, ...")."""
    sources = selection_sources(selection)
    words = [" and ".join(sources) + " pairs", "ties in" if selection.include_ties else "no ties"]
    if selection.tasks:
        words.append("tasks: " + ", ".join(selection.tasks))
    if selection.criteria:
        words.append(
            "criteria: " + ", ".join(repr(criterion[:40]) for criterion in selection.criteria[:5])
        )
    if selection.min_agreement is not None:
        words.append(f"min_agreement: {selection.min_agreement:g}")
    return "; ".join(words)


def _bool(data: Mapping, name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise InvalidInput(f"{name}: must be true or false (got {value!r}).")
    return value


def _strings(data: Mapping, name: str) -> tuple[str, ...]:
    value = data.get(name) or ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")] if name == "tasks" else [value]
    if not isinstance(value, Sequence) or any(not isinstance(v, str) for v in value):
        raise InvalidInput(f"{name}: must be a list of strings.")
    if len(value) > MAX_FILTER_VALUES:
        raise InvalidInput(f"{name}: at most {MAX_FILTER_VALUES} values.")
    return tuple(sorted(set(value)))


def _min_agreement(data: Mapping) -> float | None:
    value = data.get("min_agreement")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"min_agreement: must be a number from 0 to 1 (got {value!r}).")
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(
            f"min_agreement: must be a number from 0 to 1 (got {value!r})."
        ) from None
    if not (0.0 <= number <= 1.0):
        raise InvalidInput(f"min_agreement: must be from 0 to 1 (got {value!r}).")
    return number


def _split_text(text: str) -> dict[str, str]:
    name, equals, ratio = text.partition("=")
    if not equals:
        raise InvalidInput(f"splits: write each split as name=ratio (got {text.strip()!r}).")
    return {"name": name.strip(), "ratio": ratio.strip()}


def _splits(data: Mapping) -> tuple[Split, ...]:
    value = data.get("splits")
    if value is None:
        return Selection().splits
    if isinstance(value, str):  # "train=0.8,test=0.2", as the command line gives it
        value = [_split_text(part) for part in value.split(",")]
    if not isinstance(value, Sequence) or not value:
        raise InvalidInput("splits: give at least one split, as a list of {name, ratio}.")
    if len(value) > MAX_SPLITS:
        raise InvalidInput(f"splits: at most {MAX_SPLITS} splits.")
    splits: list[Split] = []
    for index, item in enumerate(value):
        where = f"splits[{index}]"
        if not isinstance(item, Mapping) or set(item) - {"name", "ratio"}:
            raise InvalidInput(f"{where}: must be {{name, ratio}} (got {item!r}).")
        name = str(item.get("name", "")).strip()
        if not SPLIT_NAME_PATTERN.match(name):
            raise InvalidInput(
                f"{where}.name: a lowercase name of letters, digits and _, starting with a "
                f"letter (got {name!r})."
            )
        if name in {split.name for split in splits}:
            raise InvalidInput(f"{where}.name: {name!r} is given twice.")
        raw = item.get("ratio")
        try:
            ratio = float(raw) if not isinstance(raw, bool) and raw is not None else math.nan
        except (TypeError, ValueError):
            ratio = math.nan
        if not (0.0 < ratio <= 1.0):
            raise InvalidInput(f"{where}.ratio: must be a number above 0, at most 1 (got {raw!r}).")
        splits.append(Split(name, ratio))
    total = sum(split.ratio for split in splits)
    if abs(total - 1.0) > RATIO_TOLERANCE:
        raise InvalidInput(f"splits: the ratios must add up to 1 (they add up to {total:g}).")
    return tuple(splits)


def _seed(data: Mapping) -> int:
    value = data.get("seed", 0)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InvalidInput(f"seed: must be a whole number from 0 (got {value!r}).")
    return value


def check_selection(data: Mapping[str, Any] | Selection | None) -> Selection:
    """A ``Selection`` from user input (missing keys take their defaults), or InvalidInput
    naming the first bad field."""
    if isinstance(data, Selection):
        data = data.as_json()
    data = data or {}
    if not isinstance(data, Mapping):
        raise InvalidInput("selection: must be an object of selection fields.")
    if unknown := sorted(set(data) - _FIELDS):
        raise InvalidInput(
            f"{unknown[0]}: not a selection field (known: {', '.join(sorted(_FIELDS))})."
        )
    selection = Selection(
        include_consensus=_bool(data, "include_consensus", True),
        include_adjudicated=_bool(data, "include_adjudicated", True),
        include_ties=_bool(data, "include_ties", False),
        include_ensemble=_bool(data, "include_ensemble", False),
        reference_labels=_bool(data, "reference_labels", False),
        original_media=_bool(data, "original_media", False),
        tasks=_strings(data, "tasks"),
        criteria=_strings(data, "criteria"),
        min_agreement=_min_agreement(data),
        splits=_splits(data),
        seed=_seed(data),
    )
    if not (
        selection.include_consensus
        or selection.include_adjudicated
        or selection.include_ensemble
        or selection.reference_labels
    ):
        raise InvalidInput(
            "include_consensus: choose at least one source of pairs (consensus, adjudicated "
            "or ensemble)."
        )
    return selection
