"""The claim: a live lease on the next pair for an annotator, one slot of a pair taken in
the serving order (docs/architecture.md, "Serving order").

A pair's slots are counted on the pair itself (``vote_count + lease_count < target_votes`` leaves
a slot free), so taking one is a single conditional UPDATE."""

from __future__ import annotations

import random
import time
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from annotation.core.claim_key import claim_key
from annotation.core.errors import NotAllowed
from annotation.core.metrics import CLAIMS
from annotation.core.prepared import InsertSelect, ModelColumns, execute_prepared
from annotation.models import Assignment, Membership, Pair, PairStatus, Project
from annotation.queue.services.leases import expired_leases_free
from annotation.queue.serving import BLOCK_FROM_CURSOR, NEXT_PAIR_SQL, next_pair_params
from annotation.queue.statements import (
    CONTENT_COLUMNS,
    CONTENT_JOINS,
    HELD_AHEAD_SQL,
    HELD_SQL,
    annotator_membership_lock,
    pair_with_content,
    pair_with_content_row,
)


def assignment_claim(*, project: Project, annotator) -> Assignment | None:
    """A live lease on the next pair for ``annotator``, with the pair's content loaded, or
    None when nothing is left for them (or the project, or their annotation, is paused). A
    live lease they already hold is returned again, so a reload or a second tab never takes
    a second slot."""
    expired_leases_free(project=project, now=timezone.now())
    with transaction.atomic():
        held = lease_claim(project=project, annotator=annotator)
    return with_content(held, project=project)


def assignment_claim_ahead(*, project: Project, annotator) -> Assignment | None:
    """A live lease, marked ahead, on the pair ``annotator`` will be served after the one on
    their screen, with its content loaded, so the comparison page can prepare it; the one
    they hold claimed ahead already, if any. None when nothing else is left for them or the
    project or their annotation is paused. It counts against the pair's target as any lease
    does, and is freed by ``ahead_leases_release`` (the page left) or when it expires."""
    with transaction.atomic():
        held = lease_claim(project=project, annotator=annotator, ahead=True)
    return with_content(held, project=project)


def with_content(held: Assignment | None, *, project: Project) -> Assignment | None:
    """``held`` with its pair's content loaded, if the claim did not load it; in a query of
    its own, after the claim's locks are gone."""
    if held is not None:
        if not _content_loaded(held):
            held.pair = pair_with_content(held.pair_id)
        held.pair.project = project
    return held


def _content_loaded(assignment: Assignment) -> bool:
    return Assignment.pair.is_cached(assignment) and Pair.prompt.is_cached(assignment.pair)


def lease_claim(
    *,
    project: Project,
    annotator,
    membership: tuple | None = None,
    wait: bool = True,
    ahead: bool = False,
) -> Assignment | None:
    """The lease the annotator holds, or a new one. Caller holds a transaction, and
    ``membership`` when it locked it already (``annotator_membership_lock``). ``wait``: as
    ``_take_slot``'s. A lease claimed ahead is served when none on screen is held: its clock
    starts then (``_ahead_serve``). ``ahead``: claim the pair after the one on screen instead
    (the lease they hold claimed ahead, or a new one, marked ahead)."""
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
    # The held lease is looked for in the statement that takes a slot (_TAKE_SQL).
    if cursor is None:  # their first claim: the first block, where everyone starts
        cursor = 0
    gold_first = random.random() < project.gold_rate
    lease = Assignment(
        annotator=annotator,
        left_is_a=bool(random.getrandbits(1)),
        status=Assignment.Status.LIVE,
        created_at=now,
        expires_at=now + timedelta(minutes=project.lease_minutes),
        ahead=ahead,
    )
    take = {"project": project, "lease": lease, "cursor": cursor, "wait": wait}
    found, gold = _take_slot(is_gold=gold_first, **take), gold_first
    if found is None:
        found, gold = _take_slot(is_gold=not gold_first, **take), not gold_first
    if found is None:
        CLAIMS.labels("none").inc()
        return None
    if found is not lease:  # the lease they held already
        CLAIMS.labels("held").inc()
        if found.ahead and not ahead and not _ahead_serve(found, project=project, now=now):
            # Released meanwhile (the page left in another tab, the pair excluded, the
            # leases released by a curator): it is not served; claim anew.
            return lease_claim(
                project=project, annotator=annotator, membership=membership, wait=wait
            )
        return found
    CLAIMS.labels("new").inc()
    pair_id = lease.pair_id
    # On to another block: written once a block, not once a claim. A gold pair (every
    # annotator answers each one) never moves the block everyone works through.
    if not gold and claim_key(pair_id) != cursor:
        Membership.objects.filter(pk=membership_id).update(claim_cursor=claim_key(pair_id))
    return lease


def _ahead_serve(lease: Assignment, *, project: Project, now) -> bool:
    """A lease claimed ahead is on screen from ``now``: its clock starts (the project's
    shortest look and "play to the end" are timed from ``created_at``) and it runs for the
    project's lease time from here. Returns False, changing nothing, when the lease is no
    longer live and ahead: a release that locked it first (the leave beacon of another tab,
    an exclusion, the sweep) has the last word. Caller holds the transaction."""
    expires_at = now + timedelta(minutes=project.lease_minutes)
    served = Assignment.objects.filter(
        pk=lease.pk, status=Assignment.Status.LIVE, ahead=True
    ).update(ahead=False, created_at=now, expires_at=expires_at)
    if served:
        lease.ahead, lease.created_at, lease.expires_at = False, now, expires_at
    return bool(served)


# One statement takes a slot on the first claimable pair in the annotator's serving order
# (priority, then block, then their own order within the block:
# ``annotation.queue.serving.NEXT_PAIR_SQL`` says why), locking the chosen row and skipping
# rows racing claimers hold. The outer condition makes the update change exactly one row or
# none.
_TAKE_SLOT_SQL = f"""
UPDATE {Pair._meta.db_table}
SET lease_count = lease_count + 1, status = '{PairStatus.ANNOTATING}', updated_at = %(now)s
WHERE id = {NEXT_PAIR_SQL}
  AND target_votes > (vote_count + lease_count)
  {{held}}
RETURNING {{returning}}
"""
# One round trip a claim: the annotator's held lease looked for (``held``, as
# ``annotation.queue.statements.held_lease`` reads it), and when there is none a slot taken
# (``slot``) and the lease on it written (``lease``, its columns as insert_prepared() writes
# them, its pair the slot's); the row is the lease (held or new), whether it is new, its pair
# (as the slot left it) and the pair's prompt and responses, as
# ``annotation.queue.statements.pair_with_content`` reads them. Prepared, it is planned once
# a connection, so the content joined in costs no planning on every claim.
# Whether the lease is claimed ahead is written in the statement (two statements), not bound.
_LEASE = InsertSelect(Assignment, prefix="lease_", computed={"pair": "slot.id", "ahead": "FALSE"})
_LEASE_AHEAD = InsertSelect(
    Assignment, prefix="lease_", computed={"pair": "slot.id", "ahead": "TRUE"}
)
_A_COLUMNS = ModelColumns(Assignment, "a")
_P_COLUMNS = ModelColumns(Pair, "p")


def _take_sql(held_sql: str, lease: InsertSelect) -> str:
    """``_TAKE_SQL`` with ``held_sql`` as the lease looked for first and ``lease`` the one
    written."""
    return f"""
WITH held AS ({held_sql}), slot AS ({
        _TAKE_SLOT_SQL.format(
            lock="FOR UPDATE SKIP LOCKED",
            held="AND NOT EXISTS (SELECT 1 FROM held)",
            returning=ModelColumns(Pair, Pair._meta.db_table).select_list(),
        )
    }), lease AS (
  INSERT INTO {Assignment._meta.db_table} AS a ({lease.columns})
  SELECT {lease.values} FROM slot
  RETURNING {_A_COLUMNS.select_list()}
)
SELECT lease.*, TRUE, p.*, {CONTENT_COLUMNS} FROM lease CROSS JOIN slot p {CONTENT_JOINS}
UNION ALL
SELECT held.*, FALSE, {_P_COLUMNS.select_list()}, {CONTENT_COLUMNS}
FROM held JOIN {Pair._meta.db_table} p ON p.id = held.pair_id {CONTENT_JOINS}
"""


_TAKE_SQL = _take_sql(HELD_SQL, _LEASE)
# The claim ahead: the lease the annotator holds claimed ahead, or a slot taken beside the
# lease on screen (the pair on screen is not claimable: they hold a live lease on it).
_TAKE_AHEAD_SQL = _take_sql(HELD_AHEAD_SQL, _LEASE_AHEAD)
_LEASE_PAIR_AT = _A_COLUMNS.attnames.index("pair_id")
# The block the take looks in (its first claimable pair's), read without locks; NULL when the
# annotator has nothing left to claim.
_CLAIMABLE_BLOCK_SQL = f"SELECT {BLOCK_FROM_CURSOR}"
_BLOCK_PARAMS = ("project", "annotator", "is_gold", "cursor")
# A claim that found every free slot in its block on pairs racing transactions
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
    """``lease`` with a slot taken for it, written with it (its pk and pair set) and its pair's
    content loaded, or the live lease the annotator already holds instead, or None. Without
    ``wait``, raises FreeSlotsLocked where it would sleep: a caller holding row locks of its
    own (a vote's pair) must not sleep on others' locks, which may be waiting on its own."""
    annotator = lease.annotator
    params = {
        "now": connection.ops.adapt_datetimefield_value(lease.created_at),
        **next_pair_params(project=project, annotator=annotator, is_gold=is_gold, cursor=cursor),
        **_LEASE.params(lease),
    }
    name, statement = (
        ("arbiter_take_ahead", _TAKE_AHEAD_SQL) if lease.ahead else ("arbiter_take", _TAKE_SQL)
    )
    with connection.cursor() as db:
        for attempt in range(BLOCK_SKIPS + LOCKED_RETRIES + 1):
            execute_prepared(db, name, statement, params)
            row = db.fetchone()
            if row is not None:
                return _taken(row, lease=lease)
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
