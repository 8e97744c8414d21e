"""How much a training's held-out accuracy says: the count it rests on, its 95% Wilson score
interval, and a warning below ``MIN_HELDOUT_PAIRS`` (docs/reward-models.md, "Held-out
accuracy"). The page, the API and ``train_reward_model`` all show this one report."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Fewer held-out pairs than this and the accuracy is flagged as saying little: at 30 pairs a
# 0.8 accuracy still has a 95% interval about 0.28 wide.
MIN_HELDOUT_PAIRS = 30
CONFIDENCE = 0.95
# The normal quantile for CONFIDENCE (two-sided).
_Z = 1.959963984540054


def wilson_interval(correct: int, total: int, *, z: float = _Z) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes in ``total`` trials (Wilson 1927):
    unlike the normal approximation it stays inside [0, 1] and is not zero-width at 0 or
    ``total``, which matters most for the few held-out pairs small trainings have."""
    if total <= 0:
        raise ValueError("an interval needs at least one trial")
    if not 0 <= correct <= total:
        raise ValueError("correct must lie between 0 and total")
    share = correct / total
    z2 = z * z
    centre = (share + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(share * (1 - share) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class HeldoutReport:
    """A finished training's held-out accuracy with what it rests on."""

    pairs: int
    correct: int
    accuracy: float
    low: float
    high: float

    @property
    def too_few(self) -> bool:
        return self.pairs < MIN_HELDOUT_PAIRS

    @property
    def warning(self) -> str:
        """Why the accuracy says little, or "" when it rests on enough pairs."""
        if not self.too_few:
            return ""
        noun = "pair" if self.pairs == 1 else "pairs"
        return (
            f"Only {self.pairs} held-out {noun} (fewer than {MIN_HELDOUT_PAIRS}): this "
            f"accuracy says little. Train on more decided pairs, or hold out more prompts."
        )

    def as_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "interval": [self.low, self.high],
            "confidence": CONFIDENCE,
            "method": "wilson",
            "min_pairs": MIN_HELDOUT_PAIRS,
            "too_few": self.too_few,
            "warning": self.warning,
        }

    def __str__(self) -> str:
        noun = "pair" if self.pairs == 1 else "pairs"
        return (
            f"held-out accuracy {self.accuracy:.3f} on {self.pairs} {noun} "
            f"({CONFIDENCE:.0%} interval {self.low:.3f}-{self.high:.3f})"
        )


def heldout_report(*, accuracy: float | None, pairs: int | None) -> HeldoutReport | None:
    """The report of a training's best held-out accuracy over ``pairs`` held-out pairs, or
    None before it has one. The trainer's accuracy is right / pairs, so the count of right
    pairs is recovered exactly by rounding."""
    if accuracy is None or not pairs:
        return None
    correct = round(accuracy * pairs)
    low, high = wilson_interval(correct, pairs)
    return HeldoutReport(pairs=pairs, correct=correct, accuracy=accuracy, low=low, high=high)
