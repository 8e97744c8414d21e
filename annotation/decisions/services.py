"""Deciding pairs (docs/agreement.md, "Consensus in the app"): a pair when its last vote
arrives and at import, by the project's rule (``annotation.decisions.rules``); a curator's
adjudication of a disputed pair; re-applying the project's rule to every decided pair; and
sending to adjudication the disputes nobody left can answer. The status moves themselves are
``annotation.decisions.lifecycle``'s.

What a pair's consensus reads: every human vote on it (late, extra votes included: they are
real judgements) and its prior annotations from the import, as votes of external raters.
Adjudications are never votes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.core.errors import Conflict, InvalidInput
from annotation.core.limits import MAX_ADJUDICATION_NOTE_CHARS
from annotation.core.prepared import execute_prepared
from annotation.core.webhook_events import webhook_event_record
from annotation.decisions import lifecycle
from annotation.decisions.selectors import free_annotators
from annotation.models import (
    Adjudication,
    Pair,
    PairStatus,
    PriorAnnotation,
    Project,
    Scale,
    Side,
    Vote,
    WebhookEventKind,
)

# Pairs re-applied per batch: their votes and prior annotations are read in one go.
REAPPLY_BATCH = 2000

# One query for what a pair's consensus reads: its votes and its prior annotations.
_PAIR_VALUES_SQL = f"""
SELECT value FROM {Vote._meta.db_table} WHERE pair_id = %s AND NOT is_adjudication
UNION ALL
SELECT value FROM {PriorAnnotation._meta.db_table} WHERE pair_id = %s AND value IS NOT NULL
"""


def pair_complete(
    *, pair_id: int, project: Project, target_votes: int, extra_slots: int, now: datetime
) -> lifecycle.Decision:
    """Decides a pair whose last slot a vote has just filled, by the project's rule, and
    writes the decision: one query reads its votes and prior annotations (and, for a dispute
    under the cap, one more whether any annotator is left to give the extra vote). Caller
    holds the pair's row lock, in the transaction of that vote (already saved); the pair is
    not gold."""
    with connection.cursor() as cursor:
        execute_prepared(cursor, "arbiter_pair_values", _PAIR_VALUES_SQL, [pair_id, pair_id])
        values = [row[0] for row in cursor.fetchall()]
    decision = lifecycle.pair_decision(
        project=project, values=values, target_votes=target_votes, extra_slots=extra_slots
    )
    if decision.reopened and not free_annotators(pair_ids=[pair_id]):
        # Nobody left who could give the extra vote: the curators decide now.
        decision = lifecycle.pair_decision(
            project=project,
            values=values,
            target_votes=target_votes,
            extra_slots=extra_slots,
            may_reopen=False,
        )
    recorded = lifecycle.pair_record_decision(pair_id=pair_id, decision=decision, now=now)
    # Only a decision written is told: a late vote that fills an excluded pair's last slot
    # decides nothing (docs/curators.md, "Excluding pairs").
    if recorded and project.webhooks_active and decision.status != PairStatus.ANNOTATING:
        external_id, task = Pair.objects.filter(pk=pair_id).values_list("external_id", "task")[0]
        pair_event_record(project=project, external_id=external_id, task=task, decision=decision)
    return decision


def pair_event_record(
    *,
    project: Project,
    external_id: str,
    task: str,
    decision: lifecycle.Decision,
    by: str = "votes",
) -> None:
    """The webhook event of a pair just decided (``pair.decided``) or sent to adjudication
    (``pair.escalated``), in the transaction of that change (docs/webhooks.md, "Events")."""
    pair = {"id": external_id, "task": task}
    if decision.status == PairStatus.DISPUTED:
        kind, data = WebhookEventKind.PAIR_ESCALATED, {"reason": decision.reason}
    else:
        kind, data = WebhookEventKind.PAIR_DECIDED, {"label": decision.label, "by": by}
    webhook_event_record(
        project=project, kind=kind, data={"project": project.slug, "pair": pair, **data}
    )


class ImportConsensus:
    """Decides, at import, the new pairs whose prior votes reach their target, by the
    project's rule, as the vote that completes a pair would (``pair_decision``); pairs that
    were never in the queue go straight to adjudication when disputed. Decisions are
    memoised on the values (a few hundred combinations of three likert votes), so a batch of
    thousands costs a dictionary lookup each. Used in the import's own transaction."""

    def __init__(self, *, project: Project):
        self.project = project
        self.target_votes = project.overlap
        self._decided: dict[tuple[int, ...], lifecycle.Decision] = {}

    def decide(self, values: Sequence[int]) -> lifecycle.Decision | None:
        """The decision on a new pair with these prior votes; None while they are fewer than
        its target (the annotators bring the rest)."""
        if len(values) < self.target_votes:
            return None
        key = tuple(values)
        decision = self._decided.get(key)
        if decision is None:
            decision = lifecycle.pair_decision(
                project=self.project,
                values=key,
                target_votes=self.target_votes,
                extra_slots=0,
                may_reopen=False,
            )
            self._decided[key] = decision
        return decision


# ---- Adjudication ----


def _check_label(project: Project, label: str) -> None:
    if label not in Side.values:
        raise InvalidInput(f"label: must be one of {', '.join(Side.values)} (got {label!r}).")
    if label == Side.TIE and project.scale == Scale.BINARY:
        raise InvalidInput("label: tie is not possible on this project's binary scale.")


@transaction.atomic
def pair_adjudicate(*, pair: Pair, curator, label: str, note: str) -> Adjudication:
    """Records a curator's decision (A, B or tie, with a note) on a disputed pair; it becomes
    the pair's consensus label. A pair already adjudicated may be decided again: the new
    decision supersedes the old one, which stays in the history. The caller checked that
    ``curator`` curates the pair's project."""
    project = pair.project
    _check_label(project, label)
    note = (note or "").strip()
    if not note:
        raise InvalidInput("note: say why you decided so; the note is kept with the decision.")
    if len(note) > MAX_ADJUDICATION_NOTE_CHARS:
        raise InvalidInput(f"note: at most {MAX_ADJUDICATION_NOTE_CHARS} characters.")
    locked = Pair.objects.select_for_update().only("status", "consensus_label").get(pk=pair.pk)
    live = Adjudication.objects.filter(pair_id=pair.pk, superseded_at__isnull=True).first()
    if live is None and locked.status != PairStatus.DISPUTED:
        raise Conflict(
            f"Pair {pair.external_id} is {locked.status}, not disputed: only disputed pairs"
            " are adjudicated."
        )
    now = timezone.now()
    if live is not None:
        live.superseded_at = now
        live.save(update_fields=["superseded_at"])
    lifecycle.pair_adjudicated(pair_id=pair.pk, label=label, now=now)
    decided = lifecycle.Decision(PairStatus.CONSENSUS, label, "", 0, 0)
    pair_event_record(
        project=project,
        external_id=pair.external_id,
        task=pair.task,
        decision=decided,
        by="adjudication",
    )
    audit_record(
        actor=curator,
        project=project,
        action="pair.adjudicated",
        target=pair,
        target_label=pair.external_id,
        before={"status": locked.status, "consensus_label": locked.consensus_label},
        after={"status": PairStatus.CONSENSUS, "consensus_label": label, "note": note},
    )
    return Adjudication.objects.create(
        pair_id=pair.pk, curator=curator, label=label, note=note, created_at=now
    )


# ---- Re-applying the rule ----

# Changed pairs an audit event names; beyond them it gives their number.
REAPPLY_CHANGES_AUDITED = 100


@dataclass(frozen=True)
class PairChange:
    """How re-applying the rule changed one pair."""

    external_id: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.external_id}: {self.before} -> {self.after}"


@dataclass
class Reapplied:
    """What re-applying the project's rule found and changed (or would, on a dry run)."""

    rule: str
    dry_run: bool
    examined: int = 0
    adjudicated_kept: int = 0
    changes: list[PairChange] = field(default_factory=list)

    def summary(self) -> str:
        verb = "would change" if self.dry_run else "changed"
        return (
            f"Rule {self.rule} re-applied to {self.examined} pairs: {verb}"
            f" {len(self.changes)}; {self.adjudicated_kept} adjudicated pairs keep their label."
        )


def _state(status: str, label: str, reason: str, extra_slots: int) -> str:
    """A pair's outcome in words: ``consensus A``, ``disputed (split)``."""
    if status == PairStatus.CONSENSUS:
        return f"consensus {label}"
    if status == PairStatus.DISPUTED:
        return f"disputed ({reason})" if reason else "disputed"
    if status == PairStatus.ANNOTATING:
        return f"extra annotator {extra_slots} ({reason})"
    return status


def _candidates(project: Project):
    """Pairs the rule decides again: decided ones, and imported ones with prior annotations
    (re-analysis of a released data set); never gold pairs."""
    has_priors = Exists(PriorAnnotation.objects.filter(pair_id=OuterRef("pk")))
    return Pair.objects.filter(project=project, is_gold=False).filter(
        Q(status__in=lifecycle.DECIDED_STATUSES) | (Q(status=PairStatus.IMPORTED) & has_priors)
    )


def _values_by_pair(pair_ids: list[int]) -> dict[int, list[int]]:
    values: dict[int, list[int]] = defaultdict(list)
    votes = Vote.objects.filter(pair_id__in=pair_ids, is_adjudication=False)
    for pair_id, value in votes.values_list("pair_id", "value"):
        values[pair_id].append(value)
    priors = PriorAnnotation.objects.filter(pair_id__in=pair_ids, value__isnull=False)
    for pair_id, prior in priors.values_list("pair_id", "value"):
        # The filter excludes nulls, which the row type cannot say.
        values[pair_id].append(int(prior))  # type: ignore[arg-type]
    return values


@transaction.atomic
def consensus_reapply(
    *, project: Project, dry_run: bool = False, actor=None, audited: bool = True
) -> Reapplied:
    """Decides every decided pair of the project again by its current rule (and imported
    pairs with prior annotations, for re-analysis), from the votes and prior annotations they
    have; changes no vote. Adjudicated pairs keep their label. A dispute under the cap goes
    back to the annotators with one more slot, as it does when the last vote arrives. Unless
    ``audited`` is False (a settings change that records its own event), the audit log gets
    what changed as ``actor``'s."""
    result = Reapplied(rule=project.consensus_rule, dry_run=dry_run)
    adjudicated = Exists(
        Adjudication.objects.filter(pair_id=OuterRef("pk"), superseded_at__isnull=True)
    )
    candidates = _candidates(project)
    result.adjudicated_kept = candidates.filter(adjudicated).count()
    rows = list(
        candidates.exclude(adjudicated)
        .select_for_update(of=("self",))
        .order_by("pk")
        .values_list(
            "pk",
            "external_id",
            "status",
            "consensus_label",
            "dispute_reason",
            "target_votes",
            "extra_slots",
            "vote_count",
        )
    )
    now = timezone.now()
    for start in range(0, len(rows), REAPPLY_BATCH):
        batch = rows[start : start + REAPPLY_BATCH]
        values = _values_by_pair([row[0] for row in batch])
        decided: dict[int, lifecycle.Decision] = {}
        for pk, _, _, _, _, target, extra, votes in batch:
            if values.get(pk):
                decided[pk] = lifecycle.pair_decision(
                    project=project,
                    values=values[pk],
                    target_votes=target,
                    extra_slots=extra,
                    may_reopen=votes > 0,
                )
        # A dispute goes back to the annotators only if one of them can give the extra vote.
        reopened = [pk for pk, decision in decided.items() if decision.reopened]
        answerable = free_annotators(pair_ids=reopened) if reopened else {}
        decisions: dict[int, lifecycle.Decision] = {}
        for pk, external_id, status, label, reason, target, extra, _ in batch:
            if pk not in decided:
                continue
            result.examined += 1
            decision = decided[pk]
            if decision.reopened and pk not in answerable:
                decision = lifecycle.pair_decision(
                    project=project,
                    values=values[pk],
                    target_votes=target,
                    extra_slots=extra,
                    may_reopen=False,
                )
            before = (status, label, reason, target, extra)
            after = (
                decision.status,
                decision.label,
                decision.reason,
                decision.target_votes,
                decision.extra_slots,
            )
            if before != after:
                decisions[pk] = decision
                result.changes.append(
                    PairChange(
                        external_id,
                        _state(status, label, reason, extra),
                        _state(
                            decision.status, decision.label, decision.reason, decision.extra_slots
                        ),
                    )
                )
        if decisions and not dry_run:
            lifecycle.pairs_record_decisions(
                decisions=decisions,
                from_statuses=(*lifecycle.DECIDED_STATUSES, PairStatus.IMPORTED),
                now=now,
            )
    # Disputes still with the annotators that nobody can answer, or past a lowered cap.
    settled = disputes_settle(project=project, dry_run=dry_run)
    result.examined += len(settled)
    result.changes += settled
    if audited and not dry_run:
        summary = {
            "rule": result.rule,
            "examined": result.examined,
            "adjudicated_kept": result.adjudicated_kept,
            "changed": [str(change) for change in result.changes[:REAPPLY_CHANGES_AUDITED]],
            "changed_count": len(result.changes),
        }
        audit_record(
            actor=actor,
            project=project,
            action="consensus.reapplied",
            target=project,
            after=summary,
        )
    return result


# ---- Disputes nobody can answer ----


def _escalations_record(*, project: Project, stalled: list) -> None:
    if not project.webhooks_active:
        return
    tasks = dict(Pair.objects.filter(pk__in=[row[0] for row in stalled]).values_list("pk", "task"))
    for pk, external_id, reason, _extra in stalled:
        disputed = lifecycle.Decision(PairStatus.DISPUTED, "", reason, 0, 0)
        pair_event_record(
            project=project, external_id=external_id, task=tasks[pk], decision=disputed
        )


@transaction.atomic
def disputes_settle(
    *, project: Project, pair_ids: Iterable[int] | None = None, dry_run: bool = False
) -> list[PairChange]:
    """Sends to adjudication the project's disputes (all, or those among ``pair_ids``) that
    wait for an extra vote no annotator can give: every annotator left voted on the pair,
    skipped it, is paused or is restricted away from it; or the extra slot is past the
    project's cap, lowered since. A pair whose extra slot a live lease holds stays: its
    holder may still vote. Called whenever who may vote changes (a skip, a member removed,
    re-roled or paused, a restriction, a released lease, the settings saved); the project's
    own pause holds every pair and sends none. Returns the changes (made unless ``dry_run``)."""
    waiting = Pair.objects.filter(
        project=project,
        is_gold=False,
        status__in=lifecycle.OPEN_STATUSES,
        lease_count=0,
        extra_slots__gt=0,
        # Only the extra slots are left open: every base vote is in.
        extra_slots__gte=F("target_votes") - F("vote_count"),
        vote_count__lt=F("target_votes"),
    )
    if pair_ids is not None:
        waiting = waiting.filter(pk__in=list(pair_ids))
    # Locked in id order, waiting for a claim or vote that holds one: the conditions are then
    # read again on the row as it committed, and who may still vote after that commit.
    rows = list(
        waiting.select_for_update(of=("self",))
        .order_by("pk")
        .values_list("pk", "external_id", "dispute_reason", "extra_slots")
    )
    if not rows:
        return []
    cap = project.max_extra_votes
    within_cap = [pk for pk, _, _, extra in rows if extra <= cap]
    answerable = free_annotators(pair_ids=within_cap) if within_cap else {}
    stalled = [row for row in rows if row[3] > cap or row[0] not in answerable]
    if stalled and not dry_run:
        lifecycle.pairs_send_to_adjudication(
            pair_ids=[pk for pk, *_ in stalled], now=timezone.now()
        )
        _escalations_record(project=project, stalled=stalled)
    return [
        PairChange(
            external_id,
            _state(PairStatus.ANNOTATING, "", reason, extra),
            _state(PairStatus.DISPUTED, "", reason, extra),
        )
        for _, external_id, reason, extra in stalled
    ]
