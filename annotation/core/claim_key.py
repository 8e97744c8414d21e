"""The claim key (docs/architecture.md, "Serving order"): pairs are served in blocks of
``CLAIM_BLOCK_PAIRS`` consecutive ids, the blocks in a scrambled order the same for everyone,
the pairs within a block in an order of each annotator's own. The queue's claim statements
(annotation/queue/serving.py) and the Pair index they walk (``pair_claim_idx``, in
annotation/models/pairs.py) share it, so it lives in the kernel the models may import."""

from __future__ import annotations

from django.db import models

# Serving order within one priority (annotation/queue/serving.py, ``NEXT_PAIR_SQL``; docs/
# architecture.md, "Serving order"): pairs are served in blocks of ``CLAIM_BLOCK_PAIRS``
# consecutive ids, the blocks in the order of a scrambled block number, ``claim_key``, the same
# for everyone, so the votes on a block's pairs arrive together and its pairs finish early;
# within a block each annotator takes the pairs in an order of their own (``claim_rank``).
# The key is a bijection onto [0, CLAIM_KEY_MODULUS) (the modulus is prime and the
# multiplier, about the modulus over the golden ratio, is coprime to it), so consecutive
# blocks land far apart and a project's blocks are not served in the order of its import.
CLAIM_KEY_MODULUS = 2_147_483_647
CLAIM_KEY_MULTIPLIER = 1_327_217_884
CLAIM_BLOCK_PAIRS = 64


# Integer arithmetic both databases index and match as written (Django's Mod would cast to
# numeric on PostgreSQL); the claim's raw SQL uses the same text with the table's alias.
# ("%%%%" is one "%" once Django and the database driver have each read it.)
CLAIM_KEY_TEMPLATE = (
    f"(((%(expressions)s / {CLAIM_BLOCK_PAIRS}) %%%% {CLAIM_KEY_MODULUS})"
    f" * {CLAIM_KEY_MULTIPLIER}) %%%% {CLAIM_KEY_MODULUS}"
)


class ClaimKey(models.Func):
    template = CLAIM_KEY_TEMPLATE
    output_field = models.BigIntegerField()


def claim_key(pair_id: int) -> int:
    """The place of the pair's block in the serving order within its priority (as
    ``pair_claim_idx``): the same for every pair of the block."""
    block = pair_id // CLAIM_BLOCK_PAIRS
    return (block % CLAIM_KEY_MODULUS) * CLAIM_KEY_MULTIPLIER % CLAIM_KEY_MODULUS


def claim_walk(annotator_id: int) -> tuple[int, int]:
    """The annotator's own order within a block: the multiplier and offset of ``claim_rank``
    (a multiplier in [1, modulus), so the ranks of distinct ids below the modulus differ)."""
    multiplier = 1 + claim_key(annotator_id * CLAIM_BLOCK_PAIRS) % (CLAIM_KEY_MODULUS - 1)
    offset = claim_key((annotator_id + 1) * CLAIM_BLOCK_PAIRS)
    return multiplier, offset


def claim_rank(pair_id: int, walk: tuple[int, int]) -> int:
    """The pair's place within its block for the annotator whose ``claim_walk`` is ``walk``
    (as ``annotation.queue.serving.CLAIM_RANK_SQL``)."""
    multiplier, offset = walk
    return ((pair_id % CLAIM_KEY_MODULUS) * multiplier + offset) % CLAIM_KEY_MODULUS
