"""The pair lifecycle's one owner: every move of ``Pair.status`` before the votes
(``imported -> judging -> easy | queued | imported``, ``imported -> queued``) is a service here.

Each transition is a conditional UPDATE that moves only pairs in the states it starts from, so a
move someone else made meanwhile (a curator, another run) is never overwritten. Other apps, the
judges among them, call these with plain data; ``annotation`` never imports them
(docs/architecture.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from annotation.models import Pair, PairStatus, Project

# Where the ensemble may send a pair it judged: filtered out, to the annotators, or back
# (over a run's budget) to wait for a later run or a curator.
ENSEMBLE_TARGETS = (PairStatus.EASY, PairStatus.QUEUED, PairStatus.IMPORTED)
_BULK_BATCH = 500


@dataclass(frozen=True)
class EnsembleOutcome:
    """What an ensemble decided about one pair, and where the pair goes."""

    pair_id: int
    status: str  # one of ENSEMBLE_TARGETS
    label: str  # "A", "B", "tie", or "" without valid votes
    agreement: float | None
    summary: dict = field(default_factory=dict)


@transaction.atomic
def pairs_start_judging(*, project: Project, pair_ids: Iterable[int] | None = None) -> list[int]:
    """Moves the project's imported pairs (all, or those of ``pair_ids`` still imported) to
    "judging" and returns their ids in id order; rows are locked, so two runs never share one."""
    pairs = Pair.objects.select_for_update().filter(project=project, status=PairStatus.IMPORTED)
    if pair_ids is not None:
        pairs = pairs.filter(pk__in=list(pair_ids))
    ids = list(pairs.order_by("pk").values_list("pk", flat=True))
    Pair.objects.filter(pk__in=ids, status=PairStatus.IMPORTED).update(
        status=PairStatus.JUDGING, updated_at=timezone.now()
    )
    return ids


def pairs_return_to_imported(*, pair_ids: Iterable[int]) -> int:
    """Returns pairs still "judging" to "imported" (a run cancelled or failed to start);
    returns how many moved."""
    return Pair.objects.filter(pk__in=pair_ids, status=PairStatus.JUDGING).update(
        status=PairStatus.IMPORTED, updated_at=timezone.now()
    )


@transaction.atomic
def pairs_apply_ensemble(*, outcomes: Iterable[EnsembleOutcome]) -> Counter[str]:
    """Writes each outcome onto its pair if the pair is still "judging" (a curator's move
    meanwhile is the last word); returns the pairs moved per new status."""
    by_pair = {outcome.pair_id: outcome for outcome in outcomes}
    if bad := {o.status for o in by_pair.values()} - set(ENSEMBLE_TARGETS):
        raise ValueError(f"status: the ensemble cannot send a pair to {', '.join(sorted(bad))}")
    judging = Pair.objects.filter(status=PairStatus.JUDGING)
    pairs = list(
        judging.select_for_update(of=("self",)).filter(pk__in=list(by_pair)).only("pk", "status")
    )
    now = timezone.now()
    for pair in pairs:
        outcome = by_pair[pair.pk]
        pair.status = outcome.status
        pair.ensemble_label = outcome.label
        pair.ensemble_agreement = outcome.agreement
        pair.ensemble_summary = outcome.summary
        pair.updated_at = now
    # bulk_update on the "judging" queryset: the UPDATE itself keeps the status condition.
    judging.bulk_update(
        pairs,
        ["status", "ensemble_label", "ensemble_agreement", "ensemble_summary", "updated_at"],
        batch_size=_BULK_BATCH,
    )
    return Counter(pair.status for pair in pairs)


def pairs_enqueue(*, project: Project, pair_ids: Iterable[int] | None = None) -> int:
    """Sends imported pairs (all, or the given ones) to the annotators' queue; returns how many."""
    pairs = Pair.objects.filter(project=project, status=PairStatus.IMPORTED)
    if pair_ids is not None:
        pairs = pairs.filter(pk__in=list(pair_ids))
    return pairs.update(status=PairStatus.QUEUED, updated_at=timezone.now())
