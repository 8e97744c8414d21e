"""Skipping a pair: its slot freed, and the pair never offered to the annotator again."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.core.errors import Conflict, InvalidInput
from annotation.core.limits import MAX_SKIP_NOTE_CHARS
from annotation.decisions.services import disputes_settle
from annotation.models import Assignment, Pair, Skip, Vote
from annotation.queue.services.leases import assignment_lock, leases_close, other_leases_lock


@transaction.atomic
def assignment_skip(*, assignment: Assignment, annotator, reason: str, note: str = "") -> Skip:
    """Skips the pair with a reason (a flag curators see); frees the slot, and the pair is
    never offered to this annotator again. Skipping twice returns the first skip."""
    if reason not in Skip.Reason.values:
        raise InvalidInput(f"reason: must be one of {', '.join(Skip.Reason.values)}.")
    note = (note or "").strip()
    if len(note) > MAX_SKIP_NOTE_CHARS:
        raise InvalidInput(f"note: at most {MAX_SKIP_NOTE_CHARS} characters.")
    locked = assignment_lock(assignment=assignment, annotator=annotator)
    others = other_leases_lock(locked=locked)
    existing = Skip.objects.filter(pair_id=locked.pair_id, annotator=annotator).first()
    if existing is not None:
        return existing
    if Vote.objects.filter(pair_id=locked.pair_id, annotator=annotator).exists():
        raise Conflict("You already voted on this pair; undo the vote to skip it instead.")
    freed = leases_close(locked=locked, others=others, status=Assignment.Status.SKIPPED)
    if freed:
        Pair.objects.filter(pk=locked.pair_id).update(
            lease_count=F("lease_count") - freed, updated_at=timezone.now()
        )
    skip = Skip.objects.create(
        pair_id=locked.pair_id, annotator=annotator, reason=reason, note=note
    )
    # The skipper was perhaps the last annotator who could give a dispute its extra vote.
    disputes_settle(project=assignment.pair.project, pair_ids=[locked.pair_id])
    return skip
