"""Labelled pairs for judge evaluation tests, with the marker the loopback judge reads."""

from __future__ import annotations

from annotation.models import PairStatus
from tests.factories import PairFactory, make_response


def labelled_pairs(project, labels: str, *, task: str = "text") -> list:
    """Pairs in consensus; the better response's text carries GOOD, for by_marker."""
    pairs = []
    for index, label in enumerate(labels):
        external = f"{task}-{index}"
        good, bad = f"GOOD answer {external}", f"weak answer {external}"
        pairs.append(
            PairFactory(
                project=project,
                external_id=external,
                task=task,
                status=PairStatus.CONSENSUS,
                consensus_label=label,
                response_a=make_response(project, "m1", good if label == "A" else bad),
                response_b=make_response(project, "m2", bad if label == "A" else good),
            )
        )
    return pairs
