"""Sixteen threads voting on the last slots of disputed pairs on real PostgreSQL: every pair
stays within its cap, and every pair whose slots filled has exactly one outcome, the one its
votes give (docs/agreement.md, "Consensus in the app")."""

from __future__ import annotations

import random
import time

from annotation.core.errors import DomainError
from annotation.decisions.rules import consensus
from annotation.models import Assignment, Pair, PairStatus, Vote
from annotation.queue.services import claim as queue_claim
from annotation.queue.services import votes as queue_votes
from annotation.queue.serving import OPEN_STATUSES
from tests.annotation.queue.conftest import annotator
from tests.annotation.queue.test_queue_concurrency import THREADS, _race
from tests.factories import PairFactory, ProjectFactory

MAX_EXTRA = 2


def _disputed_once(project, n: int) -> Pair:
    """A pair whose three votes (A, B, tie) disputed it: one extra slot, waiting for a vote."""
    pair = PairFactory(
        project=project,
        status=PairStatus.ANNOTATING,
        target_votes=project.overlap + 1,
        extra_slots=1,
        vote_count=project.overlap,
        dispute_reason="no_majority",
    )
    for i, (side, value) in enumerate([("A", 3), ("B", 1), ("tie", 2)]):
        Vote.objects.create(
            pair=pair,
            annotator=annotator(project, f"first{n}-{i}"),
            side=side,
            value=value,
            left_is_a=True,
        )
    return pair


def test_racing_votes_on_disputed_pairs_stay_within_the_cap_and_decide_once(
    transactional_db,
):
    # Three of up to five votes on one side decide; A, B, tie then two more may or may not.
    project = ProjectFactory(
        slug="disputes", overlap=3, min_agree=3, max_extra_votes=MAX_EXTRA, scale="ternary"
    )
    pairs = [_disputed_once(project, n) for n in range(6)]
    users = [annotator(project, f"late{i}") for i in range(THREADS)]

    def annotate(user, seed: int):
        rng = random.Random(seed)
        deadline = time.monotonic() + 30
        while True:
            assignment = queue_claim.assignment_claim(project=project, annotator=user)
            if assignment is None:
                # Nothing free now, but a vote still to come may dispute a pair and open an
                # extra slot after this claim looked: an annotator comes back while any pair
                # is open (else, on a loaded machine, every other annotator may have left).
                still_open = Pair.objects.filter(project=project, status__in=OPEN_STATUSES).exists()
                if still_open and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                return
            try:
                queue_votes.vote_submit(
                    assignment=assignment,
                    annotator=user,
                    choice=rng.choice(["left", "right", "tie"]),
                )
            except DomainError:
                return

    assert _race([lambda u=user, s=seed: annotate(u, s) for seed, user in enumerate(users)]) == []

    cap = project.overlap + MAX_EXTRA
    for pair in Pair.objects.filter(pk__in=[p.pk for p in pairs]):
        values = list(pair.votes.values_list("value", flat=True))
        counted = pair.votes.filter(is_extra=False).count()
        assert pair.target_votes <= cap, pair
        assert counted <= cap, pair
        assert (pair.vote_count, pair.lease_count) == (counted, 0), pair
        assert pair.vote_count == pair.target_votes, pair  # every slot filled
        assert pair.target_votes == project.overlap + pair.extra_slots, pair
        expected = consensus(values, scale="ternary", rule="majority", min_agree=3)
        if expected.disputed:
            assert (pair.status, pair.consensus_label) == ("disputed", ""), pair
            assert pair.extra_slots == MAX_EXTRA
            assert pair.dispute_reason == expected.reason
        else:
            assert (pair.status, pair.consensus_label) == ("consensus", expected.label), pair
    assert not Assignment.objects.filter(status=Assignment.Status.LIVE).exists()
    assert not Vote.objects.filter(is_extra=True).exists()
