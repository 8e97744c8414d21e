"""Leases once taken: expired ones freed, several freed at once, and the locks a vote, a skip
or an undo takes on an annotator's lease."""

from __future__ import annotations

from collections import Counter

from django.db import transaction
from django.db.models import F

from annotation.core.errors import NotFound
from annotation.decisions.services import disputes_settle
from annotation.models import Assignment, Pair, Project
from annotation.queue.statements import any_expired_lease

# Expired leases freed per claim: a backlog (a night of abandoned tabs) drains over a few claims.
SWEEP_BATCH = 200


def expired_leases_free(*, project: Project, now, known: bool | None = None) -> int:
    """Releases expired leases in the project, freeing their slots, in a transaction of its
    own: the claim after it then holds at most one pair lock and never waits while holding
    another. A claimer that finds another one freeing the same leases waits for it (rows are
    locked in id order, so sweepers cannot deadlock) and then finds them released: each lease
    is freed exactly once, and the claim that follows sees the freed slots."""
    # The usual answer, none, found without a transaction or a lock (``known``: when the
    # caller looked already).
    if not (known or any_expired_lease(project_id=project.pk, now=now)):
        return 0
    expired = Assignment.objects.filter(
        pair__project=project, status=Assignment.Status.LIVE, expires_at__lte=now
    )
    with transaction.atomic():
        return leases_free(
            list(
                expired.select_for_update(of=("self",))
                .order_by("pk")
                .values_list("pk", "pair_id")[:SWEEP_BATCH]
            ),
            project=project,
        )


def ahead_leases_release(*, project: Project, annotator) -> int:
    """Frees the leases the annotator holds claimed ahead in the project (the comparison
    page left before they were served); returns how many."""
    with transaction.atomic():
        ahead = Assignment.objects.filter(
            pair__project=project,
            annotator=annotator,
            status=Assignment.Status.LIVE,
            ahead=True,
        )
        return leases_free(
            list(ahead.select_for_update(of=("self",)).order_by("pk").values_list("pk", "pair_id")),
            project=project,
        )


def leases_free(leases: list[tuple[int, int]], *, project: Project) -> int:
    """Marks locked live leases (assignment id, pair id) released and frees their slots; a
    dispute whose extra slot only a lease of someone who may no longer vote held goes to
    adjudication (``disputes_settle``)."""
    if not leases:
        return 0
    Assignment.objects.filter(pk__in=[pk for pk, _ in leases]).update(
        status=Assignment.Status.RELEASED
    )
    # Pairs in id order: two transactions freeing slots on the same pairs cannot deadlock.
    freed = sorted(Counter(pair_id for _, pair_id in leases).items())
    for pair_id, count in freed:
        Pair.objects.filter(pk=pair_id).update(lease_count=F("lease_count") - count)
    disputes_settle(project=project, pair_ids=[pair_id for pair_id, _ in freed])
    return len(leases)


def assignment_lock(*, assignment: Assignment, annotator) -> Assignment:
    locked = Assignment.objects.select_for_update().filter(pk=assignment.pk).first()
    if locked is None or locked.annotator_id != annotator.pk:
        raise NotFound("No such assignment.")
    return locked


def other_leases_lock(*, locked: Assignment) -> list[int]:
    """Locks the annotator's other live leases on the same pair (a claim made after
    ``locked`` expired); a vote racing through one of them has committed once this returns."""
    if locked.status == Assignment.Status.LIVE:
        return []  # one live lease per annotator and pair: there are no others
    return list(
        Assignment.objects.select_for_update()
        .filter(
            pair_id=locked.pair_id,
            annotator_id=locked.annotator_id,
            status=Assignment.Status.LIVE,
        )
        .values_list("pk", flat=True)
    )


def leases_close(*, locked: Assignment, others: list[int], status: str) -> int:
    """Gives ``locked`` its final status and releases ``others``; returns how many slots that
    frees (the caller updates the pair). Caller holds the locks."""
    freed = len(others) + (1 if locked.status == Assignment.Status.LIVE else 0)
    if others:
        Assignment.objects.filter(pk__in=others).update(status=Assignment.Status.RELEASED)
    locked.status = status
    locked.save(update_fields=["status"])
    return freed
