"""Preference pairs to train on, and a record of where they came from.

From a project: every pair whose consensus picked a side (``Pair.consensus_label`` A or B);
ties say nothing about which response is better and are left out, and gold pairs are the
annotators' test, not data. The criterion goes with each response, as the judge will see it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from annotation.models import Pair, PairStatus, Project, Side
from judges.backends.base import content_images, content_text
from judges.images import ImageStats, image_stats_cached
from judges.reward_model import ScoringInput


class TrainingDataError(ValueError):
    """There is nothing (or too little) to train on."""


@dataclass(frozen=True)
class PreferencePair:
    key: str  # the pair's id in its source
    group: str  # its prompt: pairs of one prompt stay on one side of the split
    chosen: ScoringInput
    rejected: ScoringInput


@dataclass(frozen=True)
class TrainingData:
    pairs: list[PreferencePair]
    # What the pairs are: kind, label, counts and a sha256 over the pairs and their labels.
    source: dict = field(default_factory=dict)


def _digest(lines: list[str]) -> str:
    sha = hashlib.sha256()
    for line in sorted(lines):
        sha.update(line.encode())
        sha.update(b"\n")
    return sha.hexdigest()


def consensus_pairs(project: Project) -> TrainingData:
    """The project's current consensus pairs with a side, A or B."""
    decided = Pair.objects.filter(project=project, status=PairStatus.CONSENSUS, is_gold=False)
    ties = decided.filter(consensus_label=Side.TIE).count()
    rows = list(
        decided.filter(consensus_label__in=[Side.A, Side.B])
        .select_related("prompt", "response_a", "response_b")
        .order_by("pk")
    )
    stats: dict[str, ImageStats | None] = {}
    image_stats_cached(
        (
            sha
            for pair in rows
            for r in (pair.response_a, pair.response_b)
            for sha in content_images(r.content)
        ),
        stats,
    )
    pairs, lines = [], []
    for pair in rows:
        prompt_text = content_text(pair.prompt.content)
        inputs = {
            side: ScoringInput(
                prompt_text,
                content_text(response.content),
                tuple(stats[sha] for sha in content_images(response.content)),
                criterion=pair.criterion,
            )
            for side, response in ((Side.A, pair.response_a), (Side.B, pair.response_b))
        }
        other = Side.B if pair.consensus_label == Side.A else Side.A
        pairs.append(
            PreferencePair(
                key=pair.external_id,
                group=str(pair.prompt_id),
                chosen=inputs[Side(pair.consensus_label)],
                rejected=inputs[other],
            )
        )
        lines.append(
            f"{pair.external_id}\t{pair.consensus_label}\t{pair.prompt_id}\t"
            f"{pair.response_a_id}\t{pair.response_b_id}\t{pair.criterion}"
        )
    source = {
        "kind": "project",
        "label": project.slug,
        "project": project.slug,
        "pairs": len(pairs),
        "ties_left_out": ties,
        "sha256": _digest(lines),
    }
    return TrainingData(pairs=pairs, source=source)
