"""Votes: the annotator's vote through a lease, the vote that fills a pair's last slot
deciding it (``annotation.decisions``), the vote and the next claim in one transaction, and
the gold check after a vote on a gold pair."""

from __future__ import annotations

import math

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.agreement.services import agreement_report_request_refresh
from annotation.core.errors import Conflict, InvalidInput, NotFound
from annotation.core.limits import MAX_RATIONALE_CHARS, MAX_TIME_ON_TASK_MS, UNDO_SECONDS
from annotation.core.metrics import VOTES
from annotation.core.prepared import InsertSelect, execute_prepared, insert_prepared
from annotation.core.scales import VoteInputError, canonical_vote
from annotation.decisions.services import disputes_settle, pair_complete
from annotation.models import Assignment, Membership, Pair, Project, Role, Vote
from annotation.queue.playback import responses_play_seconds
from annotation.queue.selectors import gold_below_threshold, gold_scores
from annotation.queue.services.claim import (
    FreeSlotsLocked,
    assignment_claim,
    lease_claim,
    with_content,
)
from annotation.queue.services.leases import (
    assignment_lock,
    expired_leases_free,
    leases_close,
    other_leases_lock,
)
from annotation.queue.statements import annotator_membership_lock


def _reason_kept(project: Project) -> str:
    """The refusal of a vote sent again with the same choice and another reason: the choice
    is recorded, and a reason is changed by undoing the vote (``services/undo.py``)."""
    return (
        "Your choice on this pair is already recorded, with the reason you gave first. To "
        "change the reason, undo the vote (u on the comparison page, or POST "
        f"/api/v1/projects/{project.slug}/undo/, within {UNDO_SECONDS} seconds and before the "
        "pair is decided) and vote again with the new reason."
    )


def _check_played_to_end(*, pair: Pair, looked: float) -> None:
    """Refuses a vote given before the pair's video and audio could have played to the end
    since its lease began (``annotation.playback``)."""
    needed = responses_play_seconds(pair=pair)
    if looked < needed:
        wait = math.ceil(needed - looked)
        raise InvalidInput(
            f"Not played to the end yet: this project asks you to play each response to the "
            f"end before voting ({needed:.1f} s of video or audio); wait {wait} s more."
        )


# Counts a vote towards its pair's target, if a slot is left, and frees the lease it came
# through; the row lock it takes is held until the vote's transaction ends, so the vote that
# fills the last slot decides the pair alone. No row: the target was already met (an extra vote).
_COUNT_VOTE_SQL = f"""
UPDATE {Pair._meta.db_table}
SET vote_count = vote_count + 1, lease_count = lease_count - %s, updated_at = %s
WHERE id = %s AND vote_count < target_votes
RETURNING vote_count, target_votes, extra_slots, is_gold
"""


# PostgreSQL: a vote through a live lease in one statement, in the order the statements above
# run it: the lease closed (and locked), the vote counted if a slot is left (the pair locked),
# the vote written, extra when it was not counted. No row: the lease was not live, and nothing
# was written.
_VOTE = InsertSelect(
    Vote, prefix="vote_", computed={"is_extra": "NOT EXISTS (SELECT 1 FROM counted)"}
)
_LIVE_VOTE_SQL = f"""
WITH closed AS (
  UPDATE {Assignment._meta.db_table} SET status = '{Assignment.Status.VOTED}'
  WHERE id = %(assignment)s AND annotator_id = %(annotator)s
    AND status = '{Assignment.Status.LIVE}'
  RETURNING id
), counted AS (
  UPDATE {Pair._meta.db_table}
  SET vote_count = vote_count + 1, lease_count = lease_count - 1, updated_at = %(now)s
  WHERE id = %(pair)s AND vote_count < target_votes AND EXISTS (SELECT 1 FROM closed)
  RETURNING vote_count, target_votes, extra_slots, is_gold
), written AS (
  INSERT INTO {Vote._meta.db_table} ({_VOTE.columns}) SELECT {_VOTE.values} FROM closed
  RETURNING id
)
SELECT written.id, counted.* FROM written LEFT JOIN counted ON TRUE
"""


def _vote_through_live_lease(vote: Vote, *, now) -> tuple[bool, tuple | None]:
    """Writes ``vote`` through its live lease (PostgreSQL, ``_LIVE_VOTE_SQL``): (True, the
    pair's counters when the vote was counted, else None), or (False, None) when the lease
    is not live."""
    params = {
        "assignment": vote.assignment_id,
        "annotator": vote.annotator_id,
        "pair": vote.pair_id,
        "now": connection.ops.adapt_datetimefield_value(now),
        **_VOTE.params(vote),
    }
    with connection.cursor() as cursor:
        execute_prepared(cursor, "arbiter_live_vote", _LIVE_VOTE_SQL, params)
        row = cursor.fetchone()
    if row is None:
        return False, None
    _VOTE.saved(vote, row[0])
    slots = None if row[1] is None else tuple(row[1:])
    vote.is_extra = slots is None
    return True, slots


@transaction.atomic
def vote_submit(*, assignment: Assignment, annotator, **answer) -> tuple[Vote, bool]:
    """Records the annotator's vote through ``assignment`` (``choice`` left/right/tie, or on
    likert6 ``value`` 1..6, in on-screen terms) in canonical A/B terms; returns (vote, created).
    The same vote again returns the first one. A late vote (lease expired) is kept and counted;
    one that arrives when the pair already has its target is kept as an extra vote. The vote
    that fills the pair's last slot decides the pair by the project's rule, in this
    transaction (``annotation.decisions.services.pair_complete``)."""
    return _vote_write(assignment=assignment, annotator=annotator, **answer)


def _vote_write(
    *,
    assignment: Assignment,
    annotator,
    choice: str | None = None,
    value: int | None = None,
    rationale: str = "",
    time_on_task_ms: int | None = None,
) -> tuple[Vote, bool]:
    """``vote_submit``'s work; the caller holds the transaction."""
    if assignment.annotator_id != annotator.pk:
        raise NotFound("No such assignment.")
    if assignment.ahead:
        # Claimed ahead and never served, live, expired or freed: the pair was never on the
        # annotator's screen, and its clock never started (``_ahead_serve``).
        raise Conflict("This pair is not on your screen yet: answer the one before it first.")
    # The pair and project as the caller loaded them: only their settings are read here.
    pair = assignment.pair
    project = pair.project
    try:
        side, canonical = canonical_vote(
            scale=project.scale, left_is_a=assignment.left_is_a, choice=choice, value=value
        )
    except VoteInputError as exc:
        raise InvalidInput(str(exc)) from None
    rationale = (rationale or "").strip()
    if project.require_rationale and not rationale:
        raise InvalidInput("rationale: this project asks for a reason with every vote.")
    if len(rationale) > MAX_RATIONALE_CHARS:
        raise InvalidInput(f"rationale: at most {MAX_RATIONALE_CHARS} characters.")
    if time_on_task_ms is not None and not 0 <= time_on_task_ms <= MAX_TIME_ON_TASK_MS:
        raise InvalidInput(
            f"time_on_task_ms: must be a number of milliseconds from 0 to {MAX_TIME_ON_TASK_MS}."
        )
    now = timezone.now()
    # Timed from the lease, which the server wrote: a client's time_on_task_ms can be forged.
    looked = (now - assignment.created_at).total_seconds()
    if looked < project.min_seconds_per_vote:
        wait = math.ceil(project.min_seconds_per_vote - looked)
        raise InvalidInput(
            f"Too quick: this project asks you to look at each pair for at least "
            f"{project.min_seconds_per_vote} s before voting; wait {wait} s more."
        )
    if project.play_to_end:
        _check_played_to_end(pair=pair, looked=looked)
    vote = Vote(
        pair=pair,
        annotator=annotator,
        assignment_id=assignment.pk,
        side=side,
        value=canonical,
        left_is_a=assignment.left_is_a,
        rationale=rationale,
        time_on_task_ms=time_on_task_ms,
        is_extra=False,
        created_at=now,
    )
    # The usual case, a vote on a live lease: one statement closes the lease, counts the vote
    # and writes it.
    written, slots = _vote_through_live_lease(vote, now=now)
    if written:
        freed = 1
        assignment.status = Assignment.Status.VOTED
    else:
        # Anything else is looked at under the row lock.
        locked = assignment_lock(assignment=assignment, annotator=annotator)
        if locked.status == Assignment.Status.SKIPPED:
            raise Conflict("You skipped this pair, so it cannot take your vote.")
        others = other_leases_lock(locked=locked)
        # Voted already, or the lease expired or was released: the pair may hold our vote.
        existing = Vote.objects.filter(pair=pair, annotator=annotator).first()
        if existing is not None:
            if (existing.side, existing.value) != (side, canonical):
                raise Conflict(
                    "You already voted on this pair with a different answer; undo it to change it."
                )
            if existing.rationale != rationale:
                raise Conflict(_reason_kept(project))
            return existing, False
        freed = leases_close(locked=locked, others=others, status=Assignment.Status.VOTED)
        assignment.status = locked.status
    if not written:
        with connection.cursor() as cursor:
            cursor.execute(
                _COUNT_VOTE_SQL, [freed, connection.ops.adapt_datetimefield_value(now), pair.pk]
            )
            slots = cursor.fetchone()
    counted = slots is not None
    if not counted and freed:
        Pair.objects.filter(pk=pair.pk).update(lease_count=F("lease_count") - freed, updated_at=now)
    if not written:
        vote.is_extra = not counted
        with connection.cursor() as cursor:
            insert_prepared(cursor, "arbiter_insert_vote", vote)
    if slots is not None:
        vote_count, target_votes, extra_slots, is_gold = slots
        # Gold pairs keep their gold label: votes never decide them.
        if vote_count == target_votes and not is_gold:
            pair_complete(
                pair_id=pair.pk,
                project=project,
                target_votes=target_votes,
                extra_slots=extra_slots,
                now=now,
            )
    if pair.is_gold:
        membership_gold_check(project=project, annotator=annotator)
    # Debounced: one cheap statement; a refresh that cannot be queued never fails the vote.
    transaction.on_commit(
        lambda: agreement_report_request_refresh(project_id=project.pk), robust=True
    )
    transaction.on_commit(VOTES.labels("counted" if counted else "extra").inc)
    return vote, True


def vote_submit_and_claim(
    *, assignment: Assignment, annotator, expired: bool | None = None, **answer
) -> tuple[Vote, bool, Assignment | None]:
    """``vote_submit``, then ``assignment_claim`` for the annotator's next pair, in one
    transaction: (vote, created, the next lease or None). What each writes and answers is
    what the two calls would, one after the other (docs/api.md, "Vote and claim the next
    pair in one call"); only their order against expired leases differs, freed before the
    vote rather than after it, as a claim racing the vote may free them anyway.

    The membership is locked first, then the vote's lease and pair, then the pair claimed
    (a claim skips locked pairs, never waits on one): a curator pausing the annotator locks
    the membership before the pairs whose disputes it settles, so the two cannot deadlock.
    Expired leases are freed before the transaction: freeing them locks others' leases and
    pairs, which must not be waited on while this holds its own locks. ``expired``: whether
    the project has expired leases, when the caller read it already (None: look)."""
    project = assignment.pair.project
    if expired is not False:
        expired_leases_free(project=project, now=timezone.now(), known=expired)
    claim_after = False
    with transaction.atomic():
        membership = annotator_membership_lock(project_id=project.pk, user_id=annotator.pk)
        vote, created = _vote_write(assignment=assignment, annotator=annotator, **answer)
        if membership is not None and assignment.pair.is_gold and project.gold_pause:
            # The vote may have paused them (membership_gold_check): read it again.
            membership = annotator_membership_lock(project_id=project.pk, user_id=annotator.pk)
        # Not an annotator any more (removed while voting): the vote stands, no next pair.
        held = None
        if membership is not None:
            try:
                held = lease_claim(
                    project=project, annotator=annotator, membership=membership, wait=False
                )
            except FreeSlotsLocked:
                claim_after = True
    if claim_after:
        # Every free slot sat on a pair a racing transaction holds, perhaps another vote with
        # next whose claim wants this vote's pair: committed, the vote lets go of it, and the
        # claim waits for the others as a claim does.
        return vote, created, assignment_claim(project=project, annotator=annotator)
    return vote, created, with_content(held, project=project)


def membership_gold_check(*, project: Project, annotator) -> bool:
    """Judges the annotator's gold accuracy (after a vote on a gold pair) and, when it is
    below the project's threshold and the project says so, pauses them. Returns whether they
    are paused now. One aggregate over their gold votes, plus an update when pausing."""
    if not project.gold_pause:
        return False
    score = gold_scores(project=project, annotator_ids=[annotator.pk]).get(annotator.pk)
    if score is None or not gold_below_threshold(project=project, **score):
        return False
    Membership.objects.filter(project=project, user=annotator, role=Role.ANNOTATOR).update(
        paused=True
    )
    disputes_settle(project=project)
    return True
