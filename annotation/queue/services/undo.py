"""Undo: the annotator's last vote or skip withdrawn while no decision has read it, and the
lease on its pair live again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.core.limits import UNDO_SECONDS
from annotation.models import Assignment, Pair, Project, Skip, Vote
from annotation.queue.services.leases import assignment_lock
from annotation.queue.serving import OPEN_STATUSES

NOTHING_TO_UNDO = (
    f"Nothing to undo: a vote or a skip can be undone for {UNDO_SECONDS} seconds,"
    " while its pair is open and has room for you."
)


@dataclass(frozen=True)
class Undone:
    """What ``last_action_undo`` withdrew (a ``vote`` or a ``skip``, as it was) and the lease
    on its pair, live again, so the page can show the pair with the earlier choice."""

    assignment: Assignment
    vote: Vote | None = None
    skip: Skip | None = None


@transaction.atomic
def last_action_undo(*, annotator, project: Project) -> Undone | None:
    """Withdraws the annotator's last action in the project, a vote or a skip, if it is under
    ``UNDO_SECONDS`` old, and renews the lease on its pair so they can answer it again.
    None if there is nothing to undo (see ``_vote_undo`` and ``_skip_undo`` for when)."""
    now = timezone.now()
    since = now - timedelta(seconds=UNDO_SECONDS)
    vote = (
        Vote.objects.filter(
            pair__project=project, annotator=annotator, is_adjudication=False, created_at__gte=since
        )
        .order_by("-created_at", "-pk")
        .first()
    )
    skip = (
        Skip.objects.filter(pair__project=project, annotator=annotator, created_at__gte=since)
        .order_by("-created_at", "-pk")
        .first()
    )
    if skip is not None and (vote is None or skip.created_at >= vote.created_at):
        assignment = _skip_undo(skip=skip, annotator=annotator, now=now)
        undone = None if assignment is None else Undone(assignment=assignment, skip=skip)
    elif vote is not None:
        assignment = _vote_undo(vote=vote, annotator=annotator, now=now)
        undone = None if assignment is None else Undone(assignment=assignment, vote=vote)
    else:
        return None
    if undone is None:
        # The pair was decided or its slot taken, or a second tab undid this first.
        transaction.set_rollback(True)
        return None
    _renew(undone.assignment, project=project, now=now)
    return undone


def _vote_undo(*, vote: Vote, annotator, now) -> Assignment | None:
    """Deletes ``vote`` if no decision has read it: its pair is still open and no dispute
    raised its target (on such a pair every counted vote took part in the dispute); gives its
    slot back to its lease. Returns the locked lease, or None (then the caller rolls back).
    Caller holds a transaction.

    The vote is deleted before the pair's count goes down: of several undos of one vote (tabs,
    retries), each waits for the lease's lock and then finds it gone, so only one takes its
    vote off the count (the count going down twice broke its constraint, a 500)."""
    if vote.assignment_id is None:
        return None
    assignment = assignment_lock(assignment=Assignment(pk=vote.assignment_id), annotator=annotator)
    deleted, _ = Vote.objects.filter(pk=vote.pk).delete()
    if not deleted:
        return None
    reopened = Pair.objects.filter(
        pk=vote.pair_id, status__in=OPEN_STATUSES, consensus_label="", extra_slots=0
    ).update(
        vote_count=F("vote_count") - (0 if vote.is_extra else 1),
        lease_count=F("lease_count") + 1,
        updated_at=now,
    )
    return assignment if reopened else None


def _skip_undo(*, skip: Skip, annotator, now) -> Assignment | None:
    """Deletes ``skip`` and takes a slot on its pair again for the lease it closed, if the
    pair is still open and has a free slot (the skip freed one; someone may have taken it
    since). Returns the locked lease, or None. Caller holds a transaction."""
    skipped = (
        Assignment.objects.filter(
            pair_id=skip.pair_id, annotator=annotator, status=Assignment.Status.SKIPPED
        )
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    if skipped is None:
        return None
    assignment = assignment_lock(assignment=Assignment(pk=skipped), annotator=annotator)
    if assignment.status != Assignment.Status.SKIPPED:
        return None
    reopened = Pair.objects.filter(
        pk=skip.pair_id,
        status__in=OPEN_STATUSES,
        target_votes__gt=F("vote_count") + F("lease_count"),
    ).update(lease_count=F("lease_count") + 1, updated_at=now)
    deleted, _ = Skip.objects.filter(pk=skip.pk).delete() if reopened else (0, None)
    return assignment if deleted else None


def _renew(assignment: Assignment, *, project: Project, now) -> None:
    """Makes a locked lease live again for the project's lease time."""
    assignment.status = Assignment.Status.LIVE
    assignment.expires_at = now + timedelta(minutes=project.lease_minutes)
    assignment.save(update_fields=["status", "expires_at"])
