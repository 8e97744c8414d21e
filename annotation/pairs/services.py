"""Curators' writes on chosen pairs: gold pairs and their known answers, the serving
priority, restricting pairs to some annotators, and excluding pairs (docs/curators.md). The
pages say what each did through ``annotation.pairs.actions``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.agreement.services import agreement_report_request_refresh
from annotation.audit.services import audit_record
from annotation.core.errors import InvalidInput
from annotation.core.limits import MAX_EXCLUSION_REASON_CHARS, MAX_PRIORITY, MIN_PRIORITY
from annotation.decisions import lifecycle
from annotation.decisions.services import disputes_settle, pair_complete
from annotation.models import (
    Assignment,
    Membership,
    Pair,
    PairRestriction,
    PairStatus,
    Project,
    Role,
    Scale,
    Side,
    Vote,
)

# Pairs that may become gold: not yet past the queue (a filter run's easy pairs can be
# enqueued first). Pairs in a filter run are left to it.
GOLD_STATUSES = (PairStatus.IMPORTED, PairStatus.QUEUED, PairStatus.ANNOTATING)


def gold_labels(scale: str) -> list[str]:
    """The gold labels a scale can be answered with: a tie only where annotators can vote one."""
    return [Side.A, Side.B, Side.TIE] if scale == Scale.TERNARY else [Side.A, Side.B]


def _lock_pairs(*, project: Project, pair_ids: Iterable[int]) -> list[Pair]:
    """The project's pairs among ``pair_ids``, locked in id order (no deadlock between two
    curators). Caller holds a transaction."""
    return list(
        Pair.objects.select_for_update()
        .filter(project=project, pk__in=list(pair_ids))
        .order_by("pk")
        .only("pk", "external_id", "status", "is_gold", "gold_label", "lease_count")
    )


def _voted_on(pairs: list[Pair]) -> set[int]:
    return set(
        Vote.objects.filter(pair_id__in=[p.pk for p in pairs]).values_list("pair_id", flat=True)
    )


# Pairs an audit event names one by one; beyond them it gives their number.
AUDITED_PAIRS_NAMED = 100


def _audit_pairs(
    *, actor, project: Project, action: str, external_ids: list[str], before: dict, after: dict
) -> None:
    """One event for a curator's action on chosen pairs, naming them by external id."""
    shown = ", ".join(external_ids[:5]) + (" …" if len(external_ids) > 5 else "")
    audit_record(
        actor=actor,
        project=project,
        action=action,
        target=None,
        target_type="pairs",
        target_label=f"{len(external_ids)} pairs: {shown}" if external_ids else "no pairs",
        before=before,
        after={"pairs": external_ids[:AUDITED_PAIRS_NAMED], "count": len(external_ids), **after},
    )


def _refuse(pairs: list[Pair], why: str) -> None:
    if pairs:
        shown = ", ".join(p.external_id for p in pairs[:10]) + (" …" if len(pairs) > 10 else "")
        raise InvalidInput(f"pair_ids: {shown}: {why}")


@transaction.atomic
def pairs_set_gold(*, project: Project, pair_ids: Iterable[int], label: str, actor=None) -> int:
    """Makes the project's pairs gold pairs with the known answer ``label`` (A, B, or tie on
    a ternary scale), or corrects the label of gold pairs; returns how many. Every annotator
    may answer a gold pair once. A pair someone already voted on as an ordinary pair, or one
    past the queue, is refused (nothing changes)."""
    allowed = gold_labels(project.scale)
    if label not in allowed:
        raise InvalidInput(
            f"label: must be one of {', '.join(allowed)} on the {project.scale} scale."
        )
    pairs = _lock_pairs(project=project, pair_ids=pair_ids)
    voted = _voted_on(pairs)
    _refuse(
        [p for p in pairs if not p.is_gold and (p.status not in GOLD_STATUSES or p.pk in voted)],
        "only pairs nobody has voted on, imported or queued, can become gold.",
    )
    _audit_pairs(
        actor=actor,
        project=project,
        action="pairs.gold_set",
        external_ids=[p.external_id for p in pairs],
        before={"gold_labels": {p.external_id: p.gold_label for p in pairs if p.is_gold}},
        after={"gold_label": label},
    )
    return lifecycle.pairs_make_gold(
        pair_ids=[p.pk for p in pairs], label=label, now=timezone.now()
    )


@transaction.atomic
def pairs_clear_gold(*, project: Project, pair_ids: Iterable[int], actor=None) -> int:
    """Makes gold pairs ordinary pairs again, with the project's overlap as target; returns
    how many. A gold pair with votes is refused: they were scored as gold answers."""
    pairs = [p for p in _lock_pairs(project=project, pair_ids=pair_ids) if p.is_gold]
    voted = _voted_on(pairs)
    _refuse(
        [p for p in pairs if p.pk in voted],
        "annotators answered them as gold pairs; correct the label instead.",
    )
    _audit_pairs(
        actor=actor,
        project=project,
        action="pairs.gold_cleared",
        external_ids=[p.external_id for p in pairs],
        before={"gold_labels": {p.external_id: p.gold_label for p in pairs}},
        after={"gold": False},
    )
    return lifecycle.pairs_make_ordinary(
        pair_ids=[p.pk for p in pairs], overlap=project.overlap, now=timezone.now()
    )


@transaction.atomic
def pairs_set_priority(
    *, project: Project, pair_ids: Iterable[int], priority: int, actor=None
) -> int:
    """Sets the serving priority (higher first) of the project's pairs; returns how many."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not MIN_PRIORITY <= priority <= MAX_PRIORITY
    ):
        raise InvalidInput(f"priority: must be an integer from {MIN_PRIORITY} to {MAX_PRIORITY}.")
    chosen = Pair.objects.filter(project=project, pk__in=list(pair_ids))
    old = dict(chosen.order_by("pk").values_list("external_id", "priority"))
    _audit_pairs(
        actor=actor,
        project=project,
        action="pairs.priority_set",
        external_ids=list(old),
        before={"priorities": dict(list(old.items())[:AUDITED_PAIRS_NAMED])},
        after={"priority": priority},
    )
    return chosen.update(priority=priority, updated_at=timezone.now())


@transaction.atomic
def pairs_restrict(
    *, project: Project, pair_ids: Iterable[int], annotators: Iterable, actor=None
) -> int:
    """Only ``annotators`` (users or user ids, annotators of the project) may claim these
    pairs from now on; an empty list lifts the restriction. Returns how many pairs."""
    user_ids = {getattr(user, "pk", user) for user in annotators}
    members = set(
        Membership.objects.filter(
            project=project, role=Role.ANNOTATOR, user_id__in=user_ids
        ).values_list("user_id", flat=True)
    )
    if user_ids - members:
        unknown = ", ".join(str(pk) for pk in sorted(user_ids - members))
        raise InvalidInput(f"annotators: users {unknown} are not annotators of this project.")
    chosen = dict(
        Pair.objects.filter(project=project, pk__in=list(pair_ids))
        .order_by("pk")
        .values_list("pk", "external_id")
    )
    pks = list(chosen)
    names = sorted(
        get_user_model().objects.filter(pk__in=user_ids).values_list("username", flat=True)
    )
    _audit_pairs(
        actor=actor,
        project=project,
        action="pairs.restricted",
        external_ids=list(chosen.values()),
        before={},
        after={"annotators": names},
    )
    PairRestriction.objects.filter(pair_id__in=pks).delete()
    PairRestriction.objects.bulk_create(
        PairRestriction(pair_id=pair_id, annotator_id=user_id)
        for pair_id in pks
        for user_id in sorted(user_ids)
    )
    Pair.objects.filter(pk__in=pks).update(restricted=bool(user_ids), updated_at=timezone.now())
    disputes_settle(project=project, pair_ids=pks)
    return len(pks)


@transaction.atomic
def pairs_exclude(*, project: Project, pair_ids: Iterable[int], reason: str, actor=None) -> int:
    """Takes the project's pairs out (docs/curators.md, "Excluding pairs"): never served
    again, and left out of consensus, releases, agreement, leaderboards and judge scores.
    Their live leases are released (a vote still sent through one is kept, as any late vote),
    their votes and decision kept, and the status each had is remembered for
    ``pairs_include``. Pairs in a running filter are refused; pairs excluded already are left
    as they are. Returns how many were excluded."""
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason: say why the pairs are excluded (annotators never see it).")
    if len(reason) > MAX_EXCLUSION_REASON_CHARS:
        raise InvalidInput(f"reason: at most {MAX_EXCLUSION_REASON_CHARS} characters.")
    pairs = _lock_pairs(project=project, pair_ids=pair_ids)
    _refuse(
        [p for p in pairs if p.status == PairStatus.JUDGING],
        "a filter run is judging them; wait for it or cancel it first.",
    )
    pairs = [p for p in pairs if p.status != PairStatus.EXCLUDED]
    if not pairs:
        return 0
    _audit_pairs(
        actor=actor,
        project=project,
        action="pairs.excluded",
        external_ids=[p.external_id for p in pairs],
        before={"statuses": {p.external_id: p.status for p in pairs[:AUDITED_PAIRS_NAMED]}},
        after={"status": PairStatus.EXCLUDED, "reason": reason},
    )
    now = timezone.now()
    pks = [p.pk for p in pairs]
    # The pairs' live leases released, but only those no other transaction holds: a vote
    # locks its lease, then its pair, then the lease it serves next, so waiting for a lease
    # while holding these pairs could deadlock. The exclusion waits only for pairs, in id
    # order. A lease held meanwhile keeps its slot counted, and is closed by its vote or
    # freed by the sweep when it expires.
    released = list(
        Assignment.objects.select_for_update(of=("self",), skip_locked=True)
        .filter(pair_id__in=pks, status=Assignment.Status.LIVE)
        .order_by("pk")
        .values_list("pk", "pair_id")
    )
    Assignment.objects.filter(pk__in=[pk for pk, _ in released]).update(
        status=Assignment.Status.RELEASED
    )
    for status in {p.status for p in pairs}:
        Pair.objects.filter(pk__in=[p.pk for p in pairs if p.status == status]).update(
            status=PairStatus.EXCLUDED,
            excluded_from=status,
            exclusion_reason=reason,
            excluded_at=now,
            updated_at=now,
        )
    freed = Counter(pair_id for _, pair_id in released)
    for count in set(freed.values()):
        Pair.objects.filter(pk__in=[pk for pk, n in freed.items() if n == count]).update(
            lease_count=F("lease_count") - count
        )
    _refresh_agreement(project)
    return len(pairs)


def _refresh_agreement(project: Project) -> None:
    """The project's agreement reports computed again once the change is committed: they
    count only included pairs. A refresh that cannot be queued never fails the change."""
    transaction.on_commit(
        lambda: agreement_report_request_refresh(project_id=project.pk), robust=True
    )


@transaction.atomic
def pairs_include(*, project: Project, pair_ids: Iterable[int], actor=None) -> int:
    """Gives excluded pairs back the status they had; returns how many. An open pair whose
    votes reached its target while it was out (late votes are kept) is decided now by the
    project's rule, as its last vote would have decided it."""
    pairs = [
        p
        for p in _lock_pairs(project=project, pair_ids=pair_ids)
        if p.status == PairStatus.EXCLUDED
    ]
    if not pairs:
        return 0
    _audit_pairs(
        actor=actor,
        project=project,
        action="pairs.included",
        external_ids=[p.external_id for p in pairs],
        before={"status": PairStatus.EXCLUDED},
        after={},
    )
    now = timezone.now()
    pks = [p.pk for p in pairs]
    chosen = Pair.objects.filter(pk__in=pks)
    chosen.update(
        status=F("excluded_from"),
        excluded_from="",
        exclusion_reason="",
        excluded_at=None,
        updated_at=now,
    )
    full = chosen.filter(
        status__in=lifecycle.OPEN_STATUSES, is_gold=False, vote_count__gte=F("target_votes")
    ).values_list("pk", "target_votes", "extra_slots")
    for pair_id, target_votes, extra_slots in full:
        pair_complete(
            pair_id=pair_id,
            project=project,
            target_votes=target_votes,
            extra_slots=extra_slots,
            now=now,
        )
    disputes_settle(project=project, pair_ids=pks)
    _refresh_agreement(project)
    return len(pairs)
