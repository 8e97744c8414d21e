"""A project whose agreement report has something to draw: 24 pairs on two tasks, each with
three votes; alice and bob mostly agree, "quick" votes against them in under a second (flagged
for low agreement and for speed). Shared by the page tests and the browser test."""

from __future__ import annotations

from annotation.agreement.services import agreement_report_recompute
from annotation.models import AgreementReport, PairStatus, Vote
from tests.annotation.queue.conftest import annotator
from tests.factories import PairFactory

SIDE_OF = {1: "B", 2: "tie", 3: "A"}
OPPOSITE = {1: 3, 2: 3, 3: 1}
PAIRS = 24
TASKS = ("t2i", "edit")
# Two judges as the judges app reports them (docs/agreement.md, "Judges against people").
PER_JUDGE = [
    {"judge": "judge-steady", "pairs": 20, "agreement": 0.9, "by_order": {"AB": 0.9, "BA": 0.9}},
    {"judge": "judge-biased", "pairs": 20, "agreement": 0.55, "by_order": {"AB": 0.8, "BA": 0.3}},
]


def vote(pair, user, value: int, *, seconds: float, left_is_a: bool = True, **fields) -> Vote:
    return Vote.objects.create(
        pair=pair,
        annotator=user,
        side=SIDE_OF[value],
        value=value,
        left_is_a=left_is_a,
        time_on_task_ms=int(seconds * 1000),
        **fields,
    )


def voted_pairs(project, alice, bob, *, quick_name: str = "quick", task_names=TASKS) -> list:
    """The pairs, decided by alice's side; returns them."""
    quick = annotator(project, quick_name)
    pairs = []
    for n in range(PAIRS):
        value = (3, 1, 3, 2)[n % 4]
        pair = PairFactory(
            project=project,
            external_id=f"ag-{n}",
            task=task_names[n % len(task_names)],
            status=PairStatus.CONSENSUS,
            consensus_label=SIDE_OF[value],
            vote_count=3,
        )
        vote(pair, alice, value, seconds=12, left_is_a=bool(n % 2), rationale=f"reason {n}")
        vote(pair, bob, value if n % 6 else OPPOSITE[value], seconds=9)
        vote(pair, quick, OPPOSITE[value] if n % 3 else value, seconds=0.8)
        pairs.append(pair)
    return pairs


def cached_report(project, source: str = "all") -> AgreementReport:
    """The report computed and cached, with the judges' section above in it."""
    row = agreement_report_recompute(project=project, source=source)
    row.data["per_judge"] = PER_JUDGE
    AgreementReport.objects.filter(pk=row.pk).update(data=row.data)
    return AgreementReport.objects.get(pk=row.pk)
