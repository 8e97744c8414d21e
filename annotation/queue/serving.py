"""The serving order as SQL (docs/architecture.md, "Serving order"): which pairs an annotator
may claim now and the next one's statement. Who may still vote on a pair, its mirror, is
``annotation.decisions.selectors.FREE_ANNOTATOR_WHERE``."""

from __future__ import annotations

from django.db.models import (
    QuerySet,
)
from django.db.models.expressions import RawSQL

from annotation.core.claim_key import CLAIM_KEY_MODULUS, CLAIM_KEY_TEMPLATE, claim_walk
from annotation.core.prepared import positional
from annotation.decisions.lifecycle import OPEN_STATUSES
from annotation.models import (
    Assignment,
    Pair,
    PairRestriction,
    PairStatus,
    Project,
    Skip,
    Vote,
)

# Pairs that reached the annotators, whose votes count towards a task's progress.
ANNOTATION_STATUSES = (*OPEN_STATUSES, PairStatus.CONSENSUS, PairStatus.DISPUTED)


# Pairs an annotator may claim now: open, with a free slot, not voted on, skipped or leased by
# them (an expired lease another claim is freeing right now keeps the pair out till then), not
# restricted to others. SQL, not the ORM: the claim runs it on every request and the ORM spends
# longer building the query than PostgreSQL takes to run it. Params: claimable_params().
# Each EXISTS ends in OFFSET 0 (LIMIT 1 beside it), which keeps it a probe of
# its unique index per pair the claim looks at. Without it PostgreSQL may turn it into an
# anti-join, and on a vote table analysed while small (a new project's first minutes, before
# autovacuum analyses it again) it read all the project's votes for every claim, four times:
# 4,400 buffers a claim, not 200.
CLAIMABLE_WHERE = f"""
    p.project_id = %(project)s
    AND p.status IN ('{PairStatus.QUEUED}', '{PairStatus.ANNOTATING}')
    AND p.target_votes > (p.vote_count + p.lease_count)
    AND (NOT p.restricted OR EXISTS (
        SELECT 1 FROM {PairRestriction._meta.db_table} r
        WHERE r.pair_id = p.id AND r.annotator_id = %(annotator)s LIMIT 1 OFFSET 0))
    AND NOT EXISTS (
        SELECT 1 FROM {Vote._meta.db_table} v
        WHERE v.pair_id = p.id AND v.annotator_id = %(annotator)s LIMIT 1 OFFSET 0)
    AND NOT EXISTS (
        SELECT 1 FROM {Skip._meta.db_table} s
        WHERE s.pair_id = p.id AND s.annotator_id = %(annotator)s LIMIT 1 OFFSET 0)
    AND NOT EXISTS (
        SELECT 1 FROM {Assignment._meta.db_table} a
        WHERE a.pair_id = p.id AND a.annotator_id = %(annotator)s
          AND a.status = '{Assignment.Status.LIVE}' LIMIT 1 OFFSET 0)
"""


def claimable_params(*, project: Project, annotator) -> dict:
    return {"project": project.pk, "annotator": annotator.pk}


# Serving order (docs/architecture.md, "Serving order"): the highest priority that has a pair
# the annotator may claim; within it, the first block (``claim_key`` order, the same for
# everyone) at or after the annotator's block that has such a pair, wrapping round to the
# lowest; within that block, the pair first in the annotator's own order (``claim_rank``). So
# the annotators work through the same blocks together, and a block's pairs get their votes
# and finish while it is served, but each annotator meets a block's pairs in an order of their
# own, so neither a pair's place in a session nor the pair before it lines up across its votes.
# Finding the block is index lookups on ``pair_claim_idx`` (project, is_gold, priority desc,
# block key) that stop at the first claimable entry, from the annotator's block on, so blocks
# they finished are not walked again; the block's pairs are then at most CLAIM_BLOCK_PAIRS
# entries of the same index, ranked. ``{lock}``: the claim's row lock, on the pair taken.
# Params: ``next_pair_params()``.
CLAIM_KEY_SQL = CLAIM_KEY_TEMPLATE % {"expressions": "p.id"}
CLAIM_RANK_SQL = (
    f"(((p.id %% {CLAIM_KEY_MODULUS}) * %(walk_multiplier)s + %(walk_offset)s)"
    f" %% {CLAIM_KEY_MODULUS})"
)
_CLAIMABLE_NOW = f"{CLAIMABLE_WHERE} AND p.is_gold = %(is_gold)s"
_IN_TOP_PRIORITY = f"""{_CLAIMABLE_NOW} AND p.priority = (
        SELECT p.priority FROM {Pair._meta.db_table} p
        WHERE {_CLAIMABLE_NOW} ORDER BY p.priority DESC LIMIT 1)"""
BLOCK_FROM_CURSOR = f"""COALESCE(
    (SELECT {CLAIM_KEY_SQL} FROM {Pair._meta.db_table} p
     WHERE {_IN_TOP_PRIORITY} AND {CLAIM_KEY_SQL} >= %(cursor)s ORDER BY {CLAIM_KEY_SQL} LIMIT 1),
    (SELECT {CLAIM_KEY_SQL} FROM {Pair._meta.db_table} p
     WHERE {_IN_TOP_PRIORITY} ORDER BY {CLAIM_KEY_SQL} LIMIT 1))"""
NEXT_PAIR_SQL = f"""(SELECT p.id FROM {Pair._meta.db_table} p
    WHERE {_IN_TOP_PRIORITY} AND {CLAIM_KEY_SQL} = {BLOCK_FROM_CURSOR}
    ORDER BY {CLAIM_RANK_SQL} LIMIT 1 {{lock}})"""


def next_pair_params(*, project: Project, annotator, is_gold: bool, cursor: int) -> dict:
    """``NEXT_PAIR_SQL``'s params: the annotator's next pair from the block ``cursor`` (a
    ``claim_key``) on."""
    multiplier, offset = claim_walk(annotator.pk)
    return {
        **claimable_params(project=project, annotator=annotator),
        "is_gold": is_gold,
        "cursor": cursor,
        "walk_multiplier": multiplier,
        "walk_offset": offset,
    }


def claimable_pairs(*, project: Project, annotator) -> QuerySet[Pair]:
    """Pairs ``annotator`` may claim now (see ``CLAIMABLE_WHERE``). Unordered: the claim
    takes them in serving order (``NEXT_PAIR_SQL``)."""
    sql, params = positional(
        f"SELECT p.id FROM {Pair._meta.db_table} p WHERE {CLAIMABLE_WHERE}",
        claimable_params(project=project, annotator=annotator),
    )
    return Pair.objects.filter(pk__in=RawSQL(sql, params))
