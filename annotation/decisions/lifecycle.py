"""The pair lifecycle's one owner: every move of ``Pair.status`` and every change of
``Pair.target_votes`` is a service here, before the
votes (``imported -> judging -> easy | queued | imported``, ``imported -> queued``) and after
them (``annotating -> consensus | disputed``, or back to the queue with one more slot for a
dispute under the cap; ``disputed -> consensus`` by adjudication; re-applying the rule).

Each transition is a conditional UPDATE that moves only pairs in the states it starts from, so a
move someone else made meanwhile (a curator, another run) is never overwritten. Other apps, the
judges among them, call these with plain data; ``annotation`` never imports them
(docs/architecture.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from annotation.core.prepared import execute_prepared, sql_literals
from annotation.decisions.rules import consensus
from annotation.models import GOLD_TARGET_VOTES, Pair, PairStatus, Project

# Where the ensemble may send a pair it judged: filtered out, to the annotators, or back
# (over a run's budget) to wait for a later run or a curator.
ENSEMBLE_TARGETS = (PairStatus.EASY, PairStatus.QUEUED, PairStatus.IMPORTED)
# Pairs whose outcome is decided: changing the overlap no longer changes their target.
SETTLED_STATUSES = (PairStatus.CONSENSUS, PairStatus.DISPUTED)
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
    # Gold pairs are the curators' measure of annotators: no judge filters one out.
    pairs = Pair.objects.select_for_update().filter(
        project=project, status=PairStatus.IMPORTED, is_gold=False
    )
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
    _pairs_write_ensemble(pairs)
    return Counter(pair.status for pair in pairs)


_ENSEMBLE_COLUMNS = [
    field
    for name in ("status", "ensemble_label", "ensemble_agreement", "ensemble_summary", "updated_at")
    for field in Pair._meta.concrete_fields
    if field.name == name
]


def _pairs_write_ensemble(pairs: list[Pair]) -> None:
    """Writes the ensemble's fields of ``pairs`` on those still "judging" (the UPDATE keeps
    the status condition), as one UPDATE from arrays: ``bulk_update``'s CASE per field and
    pair cost 1.3 s of Python for a run of 2,000 pairs, more than its last batch of calls
    (docs/judges-runs.md, "Speed")."""
    columns = ", ".join(f'"{field.column}" = v."{field.column}"' for field in _ENSEMBLE_COLUMNS)
    arrays = ", ".join(f"%s::{field.db_type(connection)}[]" for field in _ENSEMBLE_COLUMNS)
    names = ", ".join(f'"{field.column}"' for field in _ENSEMBLE_COLUMNS)
    sql = (
        f'UPDATE "{Pair._meta.db_table}" AS p SET {columns} '
        f'FROM unnest(%s::bigint[], {arrays}) AS v("id", {names}) '
        f'WHERE p."id" = v."id" AND p."status" = %s'
    )
    values = [
        [field.get_db_prep_save(getattr(pair, field.attname), connection) for pair in pairs]
        for field in _ENSEMBLE_COLUMNS
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, [[pair.pk for pair in pairs], *values, PairStatus.JUDGING])


def pairs_enqueue(
    *, project: Project, pair_ids: Iterable[int] | None = None, task: str | None = None
) -> int:
    """Sends imported pairs (all, the given ones, or those of one ``task``) to the annotators'
    queue; returns how many."""
    pairs = Pair.objects.filter(project=project, status=PairStatus.IMPORTED)
    if pair_ids is not None:
        pairs = pairs.filter(pk__in=list(pair_ids))
    if task is not None:
        pairs = pairs.filter(task=task)
    return pairs.update(status=PairStatus.QUEUED, updated_at=timezone.now())


# ---- After the votes (docs/agreement.md, "Consensus in the app") ----

# Pairs the consensus step has decided; re-applying the rule may decide them again.
DECIDED_STATUSES = (PairStatus.CONSENSUS, PairStatus.DISPUTED)
# Pairs with the annotators: the queue serves them, and a vote may decide them.
OPEN_STATUSES = (PairStatus.QUEUED, PairStatus.ANNOTATING)
_DECISION_FIELDS = [
    "status",
    "consensus_label",
    "dispute_reason",
    "target_votes",
    "extra_slots",
    "decided_at",
    "updated_at",
]


@dataclass(frozen=True)
class Decision:
    """Where the project's rule sends a pair whose votes are in: ``consensus`` with a label,
    ``disputed`` (to adjudication), or back to the annotators (``annotating``) with one more
    slot when the dispute is still under the project's cap on extra votes."""

    status: str
    label: str
    reason: str
    target_votes: int
    extra_slots: int

    @property
    def reopened(self) -> bool:
        return self.status == PairStatus.ANNOTATING


def pair_decision(
    *,
    project: Project,
    values: Sequence[int],
    target_votes: int,
    extra_slots: int,
    may_reopen: bool = True,
) -> Decision:
    """The decision of the project's rule on a pair's canonical values (its votes and prior
    annotations). A dispute gets one more annotator while ``extra_slots`` is under the
    project's ``max_extra_votes`` (and ``may_reopen``: pairs that were never in the queue go
    straight to adjudication)."""
    outcome = consensus(
        values, scale=project.scale, rule=project.consensus_rule, min_agree=project.min_agree
    )
    if not outcome.disputed:
        return Decision(PairStatus.CONSENSUS, outcome.label, "", target_votes, extra_slots)
    if may_reopen and extra_slots < project.max_extra_votes:
        return Decision(
            PairStatus.ANNOTATING, "", outcome.reason, target_votes + 1, extra_slots + 1
        )
    return Decision(PairStatus.DISPUTED, "", outcome.reason, target_votes, extra_slots)


def _decision_changes(decision: Decision, now: datetime) -> dict:
    return {
        "status": decision.status,
        "consensus_label": decision.label,
        "dispute_reason": decision.reason,
        "target_votes": decision.target_votes,
        "extra_slots": decision.extra_slots,
        "decided_at": now,
        "updated_at": now,
    }


# Pair.objects.filter(pk=..., status__in=OPEN_STATUSES, vote_count=F("target_votes"))
# .update(**_decision_changes(decision, now)), prepared (its row returned, as a statement
# kept as a function must return one): a third of the votes end a pair, and
# the ORM took longer to compile the update than the rest of the vote's Python.
_DECISION_COLUMNS = [
    field for name in _DECISION_FIELDS for field in Pair._meta.concrete_fields if field.name == name
]
_RECORD_DECISION_SQL = f"""
UPDATE "{Pair._meta.db_table}"
SET {", ".join(f'"{field.column}" = %s' for field in _DECISION_COLUMNS)}
WHERE "id" = %s AND "status" IN ({sql_literals(OPEN_STATUSES)})
  AND "vote_count" = "target_votes"
RETURNING "id"
"""


def pair_record_decision(*, pair_id: int, decision: Decision, now: datetime) -> bool:
    """Writes the decision on a pair whose last slot a vote just filled (still open, its
    votes at the target); returns whether it did. Caller holds the pair's row lock, in the
    transaction of that vote."""
    changes = _decision_changes(decision, now)
    params = [
        field.get_db_prep_save(changes[field.name], connection) for field in _DECISION_COLUMNS
    ]
    with connection.cursor() as cursor:
        execute_prepared(
            cursor, "arbiter_record_decision", _RECORD_DECISION_SQL, [*params, pair_id]
        )
        return cursor.fetchone() is not None


def pairs_record_decisions(
    *, decisions: Mapping[int, Decision], from_statuses: Iterable[str], now: datetime
) -> int:
    """Writes re-applied decisions (pair id -> decision) on pairs still in ``from_statuses``;
    returns how many. Caller holds the pairs' row locks."""
    pairs = []
    for pair_id, decision in decisions.items():
        pair = Pair(pk=pair_id)
        for name, value in _decision_changes(decision, now).items():
            setattr(pair, name, value)
        pairs.append(pair)
    # bulk_update on the filtered queryset: the UPDATE itself keeps the status condition.
    return Pair.objects.filter(status__in=list(from_statuses)).bulk_update(
        pairs, _DECISION_FIELDS, batch_size=_BULK_BATCH
    )


def pairs_send_to_adjudication(*, pair_ids: Iterable[int], now: datetime) -> int:
    """``annotating -> disputed`` for disputes that wait for an extra vote nobody can give (or
    one past a lowered cap): the unused extra slots are given back, so the pair's target is
    its votes again. Only pairs still open with no live lease move; returns how many. Caller
    holds the pairs' row locks."""
    return Pair.objects.filter(
        pk__in=list(pair_ids),
        status__in=OPEN_STATUSES,
        is_gold=False,
        lease_count=0,
        extra_slots__gte=F("target_votes") - F("vote_count"),
        vote_count__lt=F("target_votes"),
    ).update(
        status=PairStatus.DISPUTED,
        # Both read the row as it was: SET expressions see the old values.
        extra_slots=F("extra_slots") - (F("target_votes") - F("vote_count")),
        target_votes=F("vote_count"),
        decided_at=now,
        updated_at=now,
    )


def pair_adjudicated(*, pair_id: int, label: str, now: datetime) -> bool:
    """``disputed -> consensus`` (or a consensus a curator decides again) with the curator's
    label; returns whether the pair moved. Caller holds the pair's row lock."""
    return (
        Pair.objects.filter(pk=pair_id, status__in=DECIDED_STATUSES).update(
            status=PairStatus.CONSENSUS,
            consensus_label=label,
            dispute_reason="",
            decided_at=now,
            updated_at=now,
        )
        == 1
    )


# ---- Targets: how many votes a pair waits for ----


def pairs_make_gold(*, pair_ids: Iterable[int], label: str, now: datetime) -> int:
    """Makes pairs gold with their label, targeted at ``GOLD_TARGET_VOTES`` (every annotator
    answers a gold pair once); returns how many. Caller checked the pairs and holds their row
    locks."""
    return Pair.objects.filter(pk__in=list(pair_ids)).update(
        is_gold=True, gold_label=label, target_votes=GOLD_TARGET_VOTES, updated_at=now
    )


def pairs_make_ordinary(*, pair_ids: Iterable[int], overlap: int, now: datetime) -> int:
    """Makes gold pairs ordinary pairs again, targeted at the project's overlap; returns how
    many. Live leases keep their slots: the target never drops below them. Caller checked the
    pairs and holds their row locks."""
    return Pair.objects.filter(pk__in=list(pair_ids)).update(
        is_gold=False,
        gold_label="",
        target_votes=Greatest(overlap, F("lease_count")),
        updated_at=now,
    )


def pairs_retarget(*, project: Project, old: int, new: int) -> bool:
    """Open pairs targeted at the old overlap get the new one; a dispute's target (raised by
    its extra slots) is its own and stays. False when a pair took more than ``new`` votes and
    leases meanwhile: it kept its target, and the caller rolls the others back. Caller holds
    the project's lock."""
    pairs = Pair.objects.filter(project=project, target_votes=old, extra_slots=0).exclude(
        status__in=SETTLED_STATUSES
    )
    pairs.alias(taken=F("vote_count") + F("lease_count")).filter(taken__lte=new).update(
        target_votes=new
    )
    return not pairs.exists()
