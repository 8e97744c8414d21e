"""The consensus rules (unanimous, majority, MMRB2's), as a pure function of one pair's
canonical vote values (docs/agreement.md, "Consensus")."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from annotation.core.scales import (
    SCALE_VALUES,
    SIDES,
    UNSURE_VALUES,
    check_choice,
    side_of_value,
)
from annotation.models import ConsensusRule, Scale

# MMRB2's dispute thresholds on the likert6 scale.
MMRB2_MAX_SPREAD = 4
MMRB2_AMBIGUOUS_MEAN = (3.0, 4.0)


class DisputeReason(enum.StrEnum):
    NO_MAJORITY = "no_majority"  # no side has enough votes
    SPLIT = "split"  # two sides both have min_agree votes
    SPREAD = "spread"  # mmrb2: max - min > 4
    AMBIGUOUS_MEAN = "ambiguous_mean"  # mmrb2: the mean lies in [3, 4]
    MAJORITY_UNSURE = "majority_unsure"  # mmrb2: more than half the votes are 3 or 4
    NOT_UNANIMOUS = "not_unanimous"


@dataclass(frozen=True)
class Consensus:
    """A pair's consensus: its label (``A``, ``B``, ``tie``), or no label and the reason."""

    label: str
    reason: str = ""

    @property
    def disputed(self) -> bool:
        return not self.label


def consensus(values: Sequence[int], *, scale: str, rule: str, min_agree: int) -> Consensus:
    """The consensus of one pair's canonical vote values under the project's rule."""
    check_choice("scale", scale, Scale.values)
    check_choice("rule", rule, ConsensusRule.values)
    if not values:
        raise ValueError("values: a consensus needs at least one vote")
    for value in values:
        if value not in SCALE_VALUES[scale]:
            raise ValueError(f"values: {value!r} is not on the {scale} scale")
    if min_agree < 1:
        raise ValueError(f"min_agree: must be at least 1 (got {min_agree})")
    sides = [side_of_value(scale, value) for value in values]
    counts = {side: sides.count(side) for side in SIDES if side in sides}
    if rule == ConsensusRule.UNANIMOUS:
        return (
            Consensus(sides[0]) if len(counts) == 1 else Consensus("", DisputeReason.NOT_UNANIMOUS)
        )
    if rule == ConsensusRule.MAJORITY:
        agreed = [side for side, count in counts.items() if count >= min_agree]
        if len(agreed) > 1:
            return Consensus("", DisputeReason.SPLIT)
        return Consensus(agreed[0]) if agreed else Consensus("", DisputeReason.NO_MAJORITY)
    if scale != Scale.LIKERT6:
        raise ValueError(f"rule: mmrb2 needs the likert6 scale (got {scale})")
    mean = sum(values) / len(values)
    if max(values) - min(values) > MMRB2_MAX_SPREAD:
        return Consensus("", DisputeReason.SPREAD)
    if MMRB2_AMBIGUOUS_MEAN[0] <= mean <= MMRB2_AMBIGUOUS_MEAN[1]:
        return Consensus("", DisputeReason.AMBIGUOUS_MEAN)
    if sum(value in UNSURE_VALUES[scale] for value in values) * 2 > len(values):
        return Consensus("", DisputeReason.MAJORITY_UNSURE)
    leader, count = max(counts.items(), key=lambda item: item[1])
    return (
        Consensus(leader) if count * 2 > len(values) else Consensus("", DisputeReason.NO_MAJORITY)
    )
