"""A small scorer with MMRB2's accuracy definition, for the release's MMRB2-compatible file:
a judge's answer on a pair is right when it names the side in ``chosen``; accuracy is the
share of right answers over the pairs that have a side (MMRB2 has no ties, so tie pairs are
left out); a pair the judge did not answer counts as wrong."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def mmrb2_accuracy(path: Path, answers: Mapping[str, str]) -> float:
    pairs = [pair for pair in json.loads(path.read_text())["pairs"] if pair["chosen"] in "AB"]
    if not pairs:
        raise ValueError(f"{path}: no pair with a side to score")
    return sum(answers.get(pair["id"]) == pair["chosen"] for pair in pairs) / len(pairs)
