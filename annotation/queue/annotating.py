"""The annotator's path through the queue: leases on pair slots (claim), votes, skips and undo.

A pair's slots are counted on the pair itself (``vote_count + lease_count < target_votes`` leaves
a slot free), so taking one is a single conditional UPDATE."""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.agreement.refresh import agreement_report_request_refresh
from annotation.core.claim_key import claim_key
from annotation.core.errors import Conflict, InvalidInput, NotAllowed, NotFound
from annotation.core.limits import (
    MAX_RATIONALE_CHARS,
    MAX_SKIP_NOTE_CHARS,
    MAX_TIME_ON_TASK_MS,
)
from annotation.core.prepared import (
    InsertSelect,
    ModelColumns,
    execute_prepared,
    insert_prepared,
)
from annotation.core.scales import VoteInputError, canonical_vote
from annotation.decisions.services import disputes_settle, pair_complete
from annotation.models import (
    Assignment,
    Membership,
    Pair,
    PairStatus,
    Project,
    Role,
    Skip,
    Vote,
)
from annotation.queue.playback import responses_play_seconds
from annotation.queue.selectors import gold_below_threshold, gold_scores
from annotation.queue.serving import (
    BLOCK_FROM_CURSOR,
    NEXT_PAIR_SQL,
    OPEN_STATUSES,
    next_pair_params,
)
from annotation.queue.statements import (
    CONTENT_COLUMNS,
    CONTENT_JOINS,
    HELD_SQL,
    annotator_membership_lock,
    any_expired_lease,
    held_lease,
    live_lease_close,
    pair_with_content,
    pair_with_content_row,
)

UNDO_SECONDS = 60
NOTHING_TO_UNDO = (
    f"Nothing to undo: a vote or a skip can be undone for {UNDO_SECONDS} seconds,"
    " while its pair is open and has room for you."
)
# Expired leases freed per claim: a backlog (a night of abandoned tabs) drains over a few claims.
SWEEP_BATCH = 200


def assignment_claim(*, project: Project, annotator) -> Assignment | None:
    """A live lease on the next pair for ``annotator``, with the pair's content loaded, or
    None when nothing is left for them (or the project, or their annotation, is paused). A
    live lease they already hold is returned again, so a reload or a second tab never takes
    a second slot."""
    _free_expired_leases(project=project, now=timezone.now())
    with transaction.atomic():
        held = _claim(project=project, annotator=annotator)
    return _with_content(held, project=project)


def _with_content(held: Assignment | None, *, project: Project) -> Assignment | None:
    """``held`` with its pair's content loaded, if the claim did not load it (SQLite); in a
    query of its own, after the claim's locks are gone."""
    if held is not None:
        if not _content_loaded(held):
            held.pair = pair_with_content(held.pair_id)
        held.pair.project = project
    return held


def _content_loaded(assignment: Assignment) -> bool:
    return Assignment.pair.is_cached(assignment) and Pair.prompt.is_cached(assignment.pair)


def _claim(
    *, project: Project, annotator, membership: tuple | None = None, wait: bool = True
) -> Assignment | None:
    """The lease the annotator holds, or a new one. Caller holds a transaction, and
    ``membership`` when it locked it already (``annotator_membership_lock``). ``wait``: as
    ``_take_slot``'s."""
    # Locking the membership serialises one annotator's claims (two tabs racing) and checks
    # the role in the same query.
    if membership is None:
        membership = annotator_membership_lock(project_id=project.pk, user_id=annotator.pk)
    if membership is None:
        raise NotAllowed("Only annotators of this project can claim pairs.")
    membership_id, project_paused, annotator_paused, cursor = membership
    if project_paused or annotator_paused:
        return None
    now = timezone.now()
    postgres = connection.vendor == "postgresql"
    # PostgreSQL looks for the held lease in the statement that takes a slot (_TAKE_SQL).
    held = None if postgres else held_lease(project_id=project.pk, user_id=annotator.pk, now=now)
    if held is None:
        if cursor is None:  # their first claim: the first block, where everyone starts
            cursor = 0
        gold_first = random.random() < project.gold_rate
        lease = Assignment(
            annotator=annotator,
            left_is_a=bool(random.getrandbits(1)),
            status=Assignment.Status.LIVE,
            created_at=now,
            expires_at=now + timedelta(minutes=project.lease_minutes),
        )
        take = {"project": project, "lease": lease, "cursor": cursor, "wait": wait}
        found, gold = _take_slot(is_gold=gold_first, **take), gold_first
        if found is None:
            found, gold = _take_slot(is_gold=not gold_first, **take), not gold_first
        if found is None:
            return None
        if found is not lease:  # PostgreSQL: the lease they held already
            return found
        pair_id = lease.pair_id
        # On to another block: written once a block, not once a claim. A gold pair (every
        # annotator answers each one) never moves the block everyone works through.
        if not gold and claim_key(pair_id) != cursor:
            Membership.objects.filter(pk=membership_id).update(claim_cursor=claim_key(pair_id))
        held = lease
        if held.pk is None:  # SQLite: the lease is written after its slot is taken
            with connection.cursor() as db:
                insert_prepared(db, "arbiter_insert_assignment", held)
    return held


# One statement takes a slot on the first claimable pair in the annotator's serving order
# (priority, then block, then their own order within the block:
# ``annotation.queue.serving.NEXT_PAIR_SQL`` says why). PostgreSQL locks the chosen row,
# skipping rows racing claimers hold; SQLite, one writer at a time, needs no lock. The outer
# condition makes the update change exactly one row or none.
_TAKE_SLOT_SQL = f"""
UPDATE {Pair._meta.db_table}
SET lease_count = lease_count + 1, status = '{PairStatus.ANNOTATING}', updated_at = %(now)s
WHERE id = {NEXT_PAIR_SQL}
  AND target_votes > (vote_count + lease_count)
  {{held}}
RETURNING {{returning}}
"""
_TAKE_SLOT_UNLOCKED = _TAKE_SLOT_SQL.format(lock="", held="", returning="id")
# PostgreSQL, one round trip a claim: the annotator's held lease looked for (``held``, as
# ``annotation.queue.statements.held_lease`` reads it), and when there is none a slot taken
# (``slot``) and the lease on it written (``lease``, its columns as insert_prepared() writes
# them, its pair the slot's); the row is the lease (held or new), whether it is new, its pair
# (as the slot left it) and the pair's prompt and responses, as
# ``annotation.queue.statements.pair_with_content`` reads them. Prepared, it is planned once
# a connection, so the content joined in costs no planning on every claim.
_LEASE = InsertSelect(Assignment, prefix="lease_", computed={"pair": "slot.id"})
_A_COLUMNS = ModelColumns(Assignment, "a")
_P_COLUMNS = ModelColumns(Pair, "p")
_TAKE_SQL = f"""
WITH held AS ({HELD_SQL}), slot AS ({
    _TAKE_SLOT_SQL.format(
        lock="FOR UPDATE SKIP LOCKED",
        held="AND NOT EXISTS (SELECT 1 FROM held)",
        returning=ModelColumns(Pair, Pair._meta.db_table).select_list(),
    )
}), lease AS (
  INSERT INTO {Assignment._meta.db_table} AS a ({_LEASE.columns})
  SELECT {_LEASE.values} FROM slot
  RETURNING {_A_COLUMNS.select_list()}
)
SELECT lease.*, TRUE, p.*, {CONTENT_COLUMNS} FROM lease CROSS JOIN slot p {CONTENT_JOINS}
UNION ALL
SELECT held.*, FALSE, {_P_COLUMNS.select_list()}, {CONTENT_COLUMNS}
FROM held JOIN {Pair._meta.db_table} p ON p.id = held.pair_id {CONTENT_JOINS}
"""
_LEASE_PAIR_AT = _A_COLUMNS.attnames.index("pair_id")
# The block the take looks in (its first claimable pair's), read without locks; NULL when the
# annotator has nothing left to claim.
_CLAIMABLE_BLOCK_SQL = f"SELECT {BLOCK_FROM_CURSOR}"
_BLOCK_PARAMS = ("project", "annotator", "is_gold", "cursor")
# PostgreSQL: a claim that found every free slot in its block on pairs racing transactions
# hold tries the blocks after it, up to BLOCK_SKIPS, at once; then it looks again in a while,
# up to LOCKED_RETRIES times. Waiting on the locks instead would deadlock: a waiter keeps the
# locks of rows it stepped past.
BLOCK_SKIPS = 3
LOCKED_RETRIES = 12
LOCKED_RETRY_S = 0.005


class FreeSlotsLocked(Exception):
    """Every free slot the claim found sits on a pair a racing transaction holds, and the
    claim was told not to wait (``_take_slot(wait=False)``)."""


def _taken(row, *, lease: Assignment) -> Assignment:
    """The lease in a row of ``_TAKE_SQL``, ``lease`` itself when it was written, with its
    pair and the pair's content loaded."""
    if row[_A_COLUMNS.width]:
        _LEASE.saved(lease, row[0])
        lease.pair_id = row[_LEASE_PAIR_AT]
        found = lease
    else:
        found = _A_COLUMNS.load(row)
    found.pair = pair_with_content_row(row, at=_A_COLUMNS.width + 1)
    return found


def _take_slot(
    *, project: Project, lease: Assignment, is_gold: bool, cursor: int, wait: bool = True
) -> Assignment | None:
    """``lease`` with a slot taken for it (its pair set), or None. On PostgreSQL the lease is
    written with it (its pk set) and its pair's content loaded, or the live lease the
    annotator already holds is returned instead; elsewhere the caller writes it. Without
    ``wait``, raises FreeSlotsLocked where it would sleep: a caller holding row locks of its
    own (a vote's pair) must not sleep on others' locks, which may be waiting on its own."""
    postgres = connection.vendor == "postgresql"
    annotator = lease.annotator
    params = {
        "now": connection.ops.adapt_datetimefield_value(lease.created_at),
        **next_pair_params(project=project, annotator=annotator, is_gold=is_gold, cursor=cursor),
    }
    take = _TAKE_SQL if postgres else _TAKE_SLOT_UNLOCKED
    if postgres:
        params.update(_LEASE.params(lease))
    with connection.cursor() as db:
        for attempt in range(BLOCK_SKIPS + LOCKED_RETRIES + 1):
            execute_prepared(db, "arbiter_take", take, params)
            row = db.fetchone()
            if row is not None:
                if not postgres:
                    lease.pair_id = row[0]
                    return lease
                return _taken(row, lease=lease)
            if not postgres:
                return None
            # None free, or the free slots of the block it looked in sit on pairs racing
            # transactions hold (a claim's for an instant, a vote with next's till its own
            # claim is done): a plain read (no lock) of that block tells which.
            db.execute(_CLAIMABLE_BLOCK_SQL, {key: params[key] for key in _BLOCK_PARAMS})
            (block,) = db.fetchone()
            if block is None:
                return None
            if attempt < BLOCK_SKIPS:
                params["cursor"] = block + 1  # the next block that has a free slot for them
                continue
            if not wait:
                raise FreeSlotsLocked
            if attempt == BLOCK_SKIPS + LOCKED_RETRIES:
                return None
            time.sleep(LOCKED_RETRY_S * (attempt + 1 - BLOCK_SKIPS))
    return None


def _free_expired_leases(*, project: Project, now, known: bool | None = None) -> int:
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


def _lock_assignment(*, assignment: Assignment, annotator) -> Assignment:
    locked = Assignment.objects.select_for_update().filter(pk=assignment.pk).first()
    if locked is None or locked.annotator_id != annotator.pk:
        raise NotFound("No such assignment.")
    return locked


def _lock_other_leases(*, locked: Assignment) -> list[int]:
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


def _close_leases(*, locked: Assignment, others: list[int], status: str) -> int:
    """Gives ``locked`` its final status and releases ``others``; returns how many slots that
    frees (the caller updates the pair). Caller holds the locks."""
    freed = len(others) + (1 if locked.status == Assignment.Status.LIVE else 0)
    if others:
        Assignment.objects.filter(pk__in=others).update(status=Assignment.Status.RELEASED)
    locked.status = status
    locked.save(update_fields=["status"])
    return freed


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
    # The usual case, a vote on a live lease: on PostgreSQL one statement closes the lease,
    # counts the vote and writes it; on SQLite the lease is closed first (which locks it), and
    # the vote counted and written after.
    postgres = connection.vendor == "postgresql"
    written, slots = _vote_through_live_lease(vote, now=now) if postgres else (False, None)
    if written or (
        not postgres and live_lease_close(assignment_id=assignment.pk, user_id=annotator.pk)
    ):
        freed = 1
        assignment.status = Assignment.Status.VOTED
    else:
        # Anything else is looked at under the row lock.
        locked = _lock_assignment(assignment=assignment, annotator=annotator)
        if locked.status == Assignment.Status.SKIPPED:
            raise Conflict("You skipped this pair, so it cannot take your vote.")
        others = _lock_other_leases(locked=locked)
        # Voted already, or the lease expired or was released: the pair may hold our vote.
        existing = Vote.objects.filter(pair=pair, annotator=annotator).first()
        if existing is not None:
            if (existing.side, existing.value, existing.rationale) == (side, canonical, rationale):
                return existing, False
            raise Conflict(
                "You already voted on this pair with a different answer; undo it to change it."
            )
        freed = _close_leases(locked=locked, others=others, status=Assignment.Status.VOTED)
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
        _free_expired_leases(project=project, now=timezone.now(), known=expired)
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
                held = _claim(
                    project=project, annotator=annotator, membership=membership, wait=False
                )
            except FreeSlotsLocked:
                claim_after = True
    if claim_after:
        # Every free slot sat on a pair a racing transaction holds, perhaps another vote with
        # next whose claim wants this vote's pair: committed, the vote lets go of it, and the
        # claim waits for the others as a claim does.
        return vote, created, assignment_claim(project=project, annotator=annotator)
    return vote, created, _with_content(held, project=project)


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


@transaction.atomic
def assignment_skip(*, assignment: Assignment, annotator, reason: str, note: str = "") -> Skip:
    """Skips the pair with a reason (a flag curators see); frees the slot, and the pair is
    never offered to this annotator again. Skipping twice returns the first skip."""
    if reason not in Skip.Reason.values:
        raise InvalidInput(f"reason: must be one of {', '.join(Skip.Reason.values)}.")
    note = (note or "").strip()
    if len(note) > MAX_SKIP_NOTE_CHARS:
        raise InvalidInput(f"note: at most {MAX_SKIP_NOTE_CHARS} characters.")
    locked = _lock_assignment(assignment=assignment, annotator=annotator)
    others = _lock_other_leases(locked=locked)
    existing = Skip.objects.filter(pair_id=locked.pair_id, annotator=annotator).first()
    if existing is not None:
        return existing
    if Vote.objects.filter(pair_id=locked.pair_id, annotator=annotator).exists():
        raise Conflict("You already voted on this pair; undo the vote to skip it instead.")
    freed = _close_leases(locked=locked, others=others, status=Assignment.Status.SKIPPED)
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
    assignment = _lock_assignment(assignment=Assignment(pk=vote.assignment_id), annotator=annotator)
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
    assignment = _lock_assignment(assignment=Assignment(pk=skipped), annotator=annotator)
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
