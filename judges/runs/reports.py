"""The judges' section of the agreement report (docs/agreement.md, "Judges against people"):
how often each judge of the project's filter runs chose the side people settled on."""

from __future__ import annotations

from django.db.models import Count, F, Q

from annotation.models import PairStatus, Project
from judges.models import Verdict


def judge_agreement_section(*, project: Project) -> list[dict]:
    """Per judge: the pairs it judged that people decided (status ``consensus``, gold pairs
    left out), and the share of its parsed verdicts on them whose side is the pair's consensus
    label, overall and by the order it was shown. Most agreeing judge first."""
    verdicts = Verdict.objects.filter(
        run__project=project,
        outcome=Verdict.Outcome.OK,
        pair__status=PairStatus.CONSENSUS,
        pair__is_gold=False,
    )
    counts = (
        verdicts.values("judge__name", "order")
        .order_by()
        .annotate(
            total=Count("id"), agreeing=Count("id", filter=Q(side=F("pair__consensus_label")))
        )
    )
    pairs = dict(
        verdicts.values("judge__name")
        .order_by()
        .annotate(n=Count("pair", distinct=True))
        .values_list("judge__name", "n")
    )
    by_judge: dict[str, dict[str, tuple[int, int]]] = {}
    for row in counts:
        by_judge.setdefault(row["judge__name"], {})[row["order"]] = (row["agreeing"], row["total"])
    rows = []
    for name, orders in by_judge.items():
        agreeing = sum(a for a, _ in orders.values())
        total = sum(t for _, t in orders.values())
        rows.append(
            {
                "judge": name,
                "pairs": pairs[name],
                "agreement": agreeing / total,
                "by_order": {
                    order: (orders[order][0] / orders[order][1] if order in orders else None)
                    for order in Verdict.Order.values
                },
            }
        )
    return sorted(rows, key=lambda row: (-row["agreement"], row["judge"]))
