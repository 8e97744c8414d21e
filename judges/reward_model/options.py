"""A training's options and their ranges, without torch: the form, the API, the command and
the services check them on the web side; the trainer (``judges.reward_model.trainer``, which
loads torch) runs with them on a worker."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

FEATURE_KINDS = ("hashed", "minilm")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class TrainingOptions:
    features: str = "hashed"
    epochs: int = 20
    lr: float = 3e-3
    batch_size: int = 64
    seed: int = 0
    patience: int = 3
    device: str = "cpu"
    holdout: float = 0.2  # share of the prompts held out

    def as_dict(self) -> dict:
        return asdict(self)


# The range of each numeric option, inclusive; the form, the API and the command use these.
LIMITS: dict[str, tuple[float, float]] = {
    "epochs": (1, 500),
    "lr": (1e-6, 1.0),
    "batch_size": (1, 4096),
    "seed": (0, 2**31 - 1),
    "patience": (1, 100),
    "holdout": (0.05, 0.5),
}


def options_errors(options: TrainingOptions) -> dict[str, str]:
    """What is wrong with ``options``, by field; empty when they are fine."""
    errors = {}
    if options.features not in FEATURE_KINDS:
        errors["features"] = f"Choose one of {', '.join(FEATURE_KINDS)}."
    if options.device not in DEVICES:
        errors["device"] = f"Choose one of {', '.join(DEVICES)}."
    for name, (low, high) in LIMITS.items():
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            errors[name] = f"{name} must be a number from {low:g} to {high:g}."
        elif not low <= value <= high:
            errors[name] = f"{name} must be from {low:g} to {high:g}, not {value:g}."
    return errors
