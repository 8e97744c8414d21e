"""Annotators racing for the same pairs on real PostgreSQL: threads, each with its own
database connection, claiming and voting at once. Overlap stays exact, nothing doubles."""

from __future__ import annotations

import random
import threading
from collections import Counter
from datetime import timedelta

from django.db import connection
from django.db.models import Count
from django.utils import timezone

from annotation.core.errors import DomainError
from annotation.models import Assignment, Pair, PairStatus, Vote
from annotation.queue.services import claim as queue_claim
from annotation.queue.services import undo as queue_undo
from annotation.queue.services import votes as queue_votes
from tests.annotation.queue.conftest import annotator
from tests.factories import PairFactory, ProjectFactory

THREADS = 16


def _race(workers) -> list[BaseException]:
    """Starts every worker at the same instant; returns what they raised."""
    barrier = threading.Barrier(len(workers))
    errors: list[BaseException] = []

    def run(work):
        try:
            connection.ensure_connection()  # connect first, so the race itself is tight
            barrier.wait()
            work()
        except BaseException as exc:  # reported to the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(work,)) for work in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    return errors


def _assert_filled_exactly(pairs, *, votes: int) -> None:
    """Each pair has exactly ``votes`` counted votes and no lease left, nobody voted twice."""
    for pair in Pair.objects.filter(pk__in=[p.pk for p in pairs]):
        assert pair.votes.count() == pair.target_votes == votes, pair
        assert (pair.vote_count, pair.lease_count) == (votes, 0)
        assert not pair.votes.filter(is_extra=True).exists()
    duplicates = Vote.objects.values("pair", "annotator").annotate(n=Count("id")).filter(n__gt=1)
    assert not duplicates.exists()
    assert not Assignment.objects.filter(status=Assignment.Status.LIVE).exists()


def test_racing_annotators_fill_every_pair_exactly_to_its_target(transactional_db):
    project = ProjectFactory(slug="race", overlap=3)
    pairs = PairFactory.create_batch(6, project=project, status=PairStatus.QUEUED)
    # Eight annotators, each working in two tabs at once: sixteen threads.
    users = [annotator(project, f"racer{i}") for i in range(THREADS // 2)]
    conflicts = Counter()

    def annotate(user, seed: int):
        rng = random.Random(seed)
        while True:
            assignment = queue_claim.assignment_claim(project=project, annotator=user)
            if assignment is None:
                return
            try:
                queue_votes.vote_submit(
                    assignment=assignment, annotator=user, choice=rng.choice(["left", "right"])
                )
            except DomainError:
                # The other tab voted differently on the same assignment first: refused.
                conflicts[user.pk] += 1

    workers = [lambda u=user, s=seed: annotate(u, s) for seed, user in enumerate(users * 2)]
    assert _race(workers) == []

    _assert_filled_exactly(pairs, votes=3)
    assert Vote.objects.count() == 18


def test_racing_claims_never_lease_a_pair_beyond_its_target(transactional_db):
    project = ProjectFactory(slug="claims", overlap=3)
    pairs = PairFactory.create_batch(2, project=project, status=PairStatus.QUEUED)
    users = [annotator(project, f"claimer{i}") for i in range(THREADS)]
    granted: list[int | None] = []

    def claim(user):
        assignment = queue_claim.assignment_claim(project=project, annotator=user)
        granted.append(assignment.pair_id if assignment else None)

    assert _race([lambda u=user: claim(u) for user in users]) == []
    assert Counter(granted) == {pairs[0].pk: 3, pairs[1].pk: 3, None: THREADS - 6}
    live = Assignment.objects.filter(status=Assignment.Status.LIVE)
    assert Counter(live.values_list("pair_id", flat=True)) == {pairs[0].pk: 3, pairs[1].pk: 3}
    assert set(Pair.objects.values_list("lease_count", flat=True)) == {3}


def test_two_tabs_claiming_at_once_share_one_lease(transactional_db):
    project = ProjectFactory(slug="tabs", overlap=3)
    PairFactory.create_batch(4, project=project, status=PairStatus.QUEUED)
    user = annotator(project, "tabby")
    got: list[int] = []

    def claim():
        got.append(queue_claim.assignment_claim(project=project, annotator=user).pk)

    assert _race([claim for _ in range(8)]) == []
    assert len(set(got)) == 1
    assert Assignment.objects.filter(annotator=user).count() == 1


def test_racing_claims_free_each_expired_lease_exactly_once(transactional_db):
    project = ProjectFactory(slug="expiry", overlap=2)
    pairs = PairFactory.create_batch(4, project=project, status=PairStatus.QUEUED)
    leavers = [annotator(project, f"leaver{i}") for i in range(8)]
    stale = [queue_claim.assignment_claim(project=project, annotator=u) for u in leavers]
    assert set(Pair.objects.values_list("lease_count", flat=True)) == {2}
    Assignment.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    users = [annotator(project, f"taker{i}") for i in range(THREADS)]
    granted: list[int | None] = []

    def claim(user):
        assignment = queue_claim.assignment_claim(project=project, annotator=user)
        granted.append(assignment.pair_id if assignment else None)

    assert _race([lambda u=user: claim(u) for user in users]) == []
    assert Counter(granted) == {**{p.pk: 2 for p in pairs}, None: THREADS - 8}
    released = Assignment.objects.filter(pk__in=[a.pk for a in stale], status="released")
    assert released.count() == 8
    assert set(Pair.objects.values_list("lease_count", flat=True)) == {2}


def test_six_undos_of_one_vote_at_once_undo_it_once(transactional_db):
    # Six tabs (or retries) undoing the same vote: one undoes it, the others find nothing to
    # undo. The count went down once per undo before, and the second broke its constraint.
    project = ProjectFactory(slug="undo", overlap=3)
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    user = annotator(project, "undoer")
    assignment = queue_claim.assignment_claim(project=project, annotator=user)
    queue_votes.vote_submit(assignment=assignment, annotator=user, choice="left")
    undone: list[object] = []

    def undo():
        undone.append(queue_undo.last_action_undo(annotator=user, project=project))

    assert _race([undo for _ in range(6)]) == []
    assert sum(result is not None for result in undone) == 1
    pair.refresh_from_db()
    assert (pair.vote_count, pair.lease_count) == (0, 1)
    assert not Vote.objects.filter(pair=pair).exists()
    assert Assignment.objects.get(pk=assignment.pk).status == Assignment.Status.LIVE


def test_racing_votes_that_claim_the_next_pair_fill_every_pair_exactly_once(
    transactional_db, monkeypatch
):
    """The one-round-trip loop (vote with ``"next": true``) over the API, eight annotators in
    two tabs each: the same invariants as the two calls, and each pair decided once."""
    from rest_framework.test import APIClient

    from annotation.decisions import services as consensus

    project = ProjectFactory(slug="next-race", overlap=3)
    pairs = PairFactory.create_batch(6, project=project, status=PairStatus.QUEUED)
    users = [annotator(project, f"looper{i}") for i in range(THREADS // 2)]
    decided: Counter[int] = Counter()
    decide = consensus.pair_complete

    def counting_pair_complete(**kwargs):
        decided[kwargs["pair_id"]] += 1
        return decide(**kwargs)

    monkeypatch.setattr(queue_votes, "pair_complete", counting_pair_complete)
    statuses: Counter[int] = Counter()

    def loop(user, seed: int):
        rng = random.Random(seed)
        api = APIClient()
        api.force_authenticate(user)
        claimed = api.post(f"/api/v1/projects/{project.slug}/claim/")
        current = claimed.json() if claimed.status_code == 200 else None
        while current is not None:
            answer = api.post(
                f"/api/v1/assignments/{current['id']}/vote/",
                {"choice": rng.choice(["left", "right"]), "next": True},
                format="json",
            )
            statuses[answer.status_code] += 1
            if answer.status_code == 409:
                # The other tab voted differently through the same lease first: refused, and
                # nothing claimed; this tab asks for its next pair as the page would.
                again = api.post(f"/api/v1/projects/{project.slug}/claim/")
                current = again.json() if again.status_code == 200 else None
                continue
            current = answer.json()["next"]

    workers = [lambda u=user, s=seed: loop(u, s) for seed, user in enumerate(users * 2)]
    assert _race(workers) == []
    assert set(statuses) <= {200, 201, 409}
    assert statuses[201] == 18
    _assert_filled_exactly(pairs, votes=3)
    assert decided == {p.pk: 1 for p in pairs}


def _hold_lock(pair_ids: list[int], *, locked: threading.Event, release: threading.Event):
    """A transaction on its own connection holding the row locks of ``pair_ids`` (as another
    annotator's vote holds its pair's) until ``release``."""

    def run():
        from django.db import transaction

        try:
            with transaction.atomic():
                list(Pair.objects.select_for_update().filter(pk__in=pair_ids))
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    assert locked.wait(timeout=10), "the lock holder never started"
    return thread


def test_a_claim_whose_block_is_all_locked_takes_a_pair_of_the_next_block(
    transactional_db, monkeypatch
):
    # The annotator's block has one pair left for them, held for a while by another
    # transaction; another block has free pairs. The claim takes one of those at once: it
    # answered "nothing left" after a dozen retries on the held block before.
    from annotation.core.claim_key import CLAIM_BLOCK_PAIRS, claim_key

    project = ProjectFactory(slug="locked-block", overlap=1)
    pairs = [
        PairFactory(id=block * CLAIM_BLOCK_PAIRS, project=project, status=PairStatus.QUEUED)
        for block in (3, 5)
    ]
    first, second = sorted(pairs, key=lambda pair: claim_key(pair.pk))
    user = annotator(project, "blocked")
    locked, release = threading.Event(), threading.Event()
    holder = _hold_lock([first.pk], locked=locked, release=release)
    slept: list[float] = []
    monkeypatch.setattr(queue_claim.time, "sleep", slept.append)
    try:
        assignment = queue_claim.assignment_claim(project=project, annotator=user)
    finally:
        release.set()
        holder.join(timeout=30)
    assert assignment is not None
    assert assignment.pair_id == second.pk
    assert slept == []  # taken at once, not after waiting on the held block


def test_two_votes_with_next_each_wanting_the_pair_the_other_holds_both_get_it(
    transactional_db, monkeypatch
):
    # Two annotators vote at once, each on the pair the other may still vote on, and nothing
    # else is left: each vote's transaction holds its own pair while its claim looks at the
    # other's. Both answered "nothing left" before, each retrying till the other gave up.
    project = ProjectFactory(slug="crossed", overlap=2)
    pairs = PairFactory.create_batch(2, project=project, status=PairStatus.QUEUED)
    users = [annotator(project, f"crossed{i}") for i in range(2)]
    project.refresh_from_db()
    leases = []
    for user, other in zip(users, reversed(pairs), strict=True):
        # Each annotator's lease on a pair of their own: the other pair kept out meanwhile.
        Pair.objects.filter(pk=other.pk).update(status=PairStatus.IMPORTED)
        leases.append(queue_claim.assignment_claim(project=project, annotator=user))
        Pair.objects.filter(pk=other.pk).update(status=PairStatus.QUEUED)
    assert [lease.pair_id for lease in leases] == [pair.pk for pair in pairs]
    both_voted = threading.Barrier(2, timeout=10)
    first_claim = threading.local()
    claim = queue_votes.lease_claim

    def claim_once_both_voted(**kwargs):
        if not getattr(first_claim, "seen", False):
            first_claim.seen = True
            both_voted.wait()  # both votes written, both pairs locked
        return claim(**kwargs)

    monkeypatch.setattr(queue_votes, "lease_claim", claim_once_both_voted)
    nexts: dict[int, int | None] = {}

    def vote(user, lease):
        _, _, held = queue_votes.vote_submit_and_claim(
            assignment=lease, annotator=user, choice="left"
        )
        nexts[user.pk] = held.pair_id if held else None

    assert _race([lambda u=u, a=a: vote(u, a) for u, a in zip(users, leases, strict=True)]) == []
    assert nexts == {users[0].pk: leases[1].pair_id, users[1].pk: leases[0].pair_id}
    assert set(Pair.objects.values_list("vote_count", "lease_count")) == {(1, 1)}


def test_excluding_pairs_while_annotators_vote_loses_nothing_and_never_deadlocks(
    transactional_db,
):
    """A curator excludes and includes every pair over and over while annotators claim and
    vote: no deadlock or error, every vote kept, no pair beyond its target, and no pair left
    with a lease count its live leases do not have (docs/curators.md, "Excluding pairs")."""
    from annotation.pairs.services import pairs_exclude, pairs_include

    project = ProjectFactory(slug="exclude-race", overlap=3)
    pairs = PairFactory.create_batch(8, project=project, status=PairStatus.QUEUED)
    curator = annotator(project, "curator")
    users = [annotator(project, f"voter{i}") for i in range(6)]
    ids = [pair.pk for pair in pairs]
    votes_sent = Counter()

    def annotate(user):
        for _ in range(12):
            assignment = queue_claim.assignment_claim(project=project, annotator=user)
            if assignment is None:
                return
            queue_votes.vote_submit(assignment=assignment, annotator=user, choice="left")
            votes_sent[user.pk] += 1

    def curate():
        for round_ in range(6):
            pairs_exclude(project=project, pair_ids=ids, reason=f"round {round_}", actor=curator)
            pairs_include(project=project, pair_ids=ids, actor=curator)

    assert _race([curate, *[lambda u=user: annotate(u) for user in users]]) == []
    assert Vote.objects.count() == sum(votes_sent.values())
    for pair in Pair.objects.filter(pk__in=ids):
        live = pair.assignments.filter(status=Assignment.Status.LIVE).count()
        assert pair.lease_count == live, pair
        assert pair.vote_count == pair.votes.filter(is_extra=False).count() <= pair.target_votes
        assert pair.status != PairStatus.EXCLUDED
