"""A small scorer with MMRB2's accuracy definition (its evaluate/compute_scores), for the
release's MMRB2-compatible file. A judge answers each pair in both orders: ``forward`` (the
pair as given, A then B) and ``reverse`` (B shown first, so its answer is flipped back). Every
answer given counts once: accuracy is the right answers over the answers given; a pair the
judge did not answer at all is left out, as is an order it gave no answer for."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

_FLIP = {"A": "B", "B": "A"}


def mmrb2_accuracy(path: Path, answers: Mapping[str, Mapping[str, str | None]]) -> float:
    """``answers``: pair id -> {"forward": "A" | "B" | None, "reverse": ...}."""
    right = given = 0
    for pair in json.loads(path.read_text())["pairs"]:
        answer = answers.get(pair["id"])
        if answer is None:
            continue
        for order in ("forward", "reverse"):
            said = answer.get(order)
            if not said:
                continue
            given += 1
            right += (_FLIP.get(said, said) if order == "reverse" else said) == pair["chosen"]
    if not given:
        raise ValueError(f"{path}: no answer to score")
    return right / given
