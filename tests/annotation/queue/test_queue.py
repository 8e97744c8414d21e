"""The claim: which pair an annotator gets, leases, overlap, and the curators' levers."""

from __future__ import annotations

import io
import random
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.core.claim_key import CLAIM_BLOCK_PAIRS, claim_key, claim_rank, claim_walk
from annotation.core.errors import InvalidInput, NotAllowed
from annotation.core.prepared import named_dollar_placeholders
from annotation.decisions import lifecycle as pairs
from annotation.models import (
    GOLD_TARGET_VOTES,
    Assignment,
    Pair,
    PairRestriction,
    PairStatus,
    Project,
)
from annotation.pairs import services as pair_services
from annotation.queue.selectors import annotator_progress
from annotation.queue.services import claim as queue_claim
from annotation.queue.services import levers
from annotation.queue.services import skips as queue_skips
from annotation.queue.services import votes as queue_votes
from tests.annotation.queue.conftest import annotator, steady_statements
from tests.factories import PairFactory


def claim_and_vote(project, user, choice: str = "left") -> Pair:
    assignment = queue_claim.assignment_claim(project=project, annotator=user)
    assert assignment is not None, f"{user} got nothing"
    queue_votes.vote_submit(assignment=assignment, annotator=user, choice=choice)
    return assignment.pair


def test_claim_leases_a_slot_for_the_projects_lease_time(project, alice, queued_pairs):
    project.lease_minutes = 20
    project.save(update_fields=["lease_minutes"])
    before = timezone.now()
    assignment = queue_claim.assignment_claim(project=project, annotator=alice)
    assert assignment.status == Assignment.Status.LIVE
    assert (
        before + timedelta(minutes=20)
        <= assignment.expires_at
        <= timezone.now() + timedelta(minutes=20)
    )
    pair = Pair.objects.get(pk=assignment.pair_id)
    assert (pair.status, pair.lease_count, pair.vote_count) == (PairStatus.ANNOTATING, 1, 0)


def test_second_tab_gets_the_same_assignment_and_no_second_slot(project, alice, queued_pairs):
    first = queue_claim.assignment_claim(project=project, annotator=alice)
    again = queue_claim.assignment_claim(project=project, annotator=alice)
    assert again.pk == first.pk
    assert again.left_is_a == first.left_is_a
    assert Assignment.objects.filter(annotator=alice).count() == 1
    assert Pair.objects.get(pk=first.pair_id).lease_count == 1


def test_a_pair_gets_exactly_its_target_in_leases(project):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=3)
    users = [annotator(project, f"ann{i}") for i in range(4)]
    claims = [queue_claim.assignment_claim(project=project, annotator=u) for u in users]
    assert [c.pair_id if c else None for c in claims] == [pair.pk, pair.pk, pair.pk, None]
    assert Pair.objects.get(pk=pair.pk).lease_count == 3


def test_expired_lease_frees_its_slot(project, alice, bob):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    assert queue_claim.assignment_claim(project=project, annotator=bob) is None
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    taken = queue_claim.assignment_claim(project=project, annotator=bob)
    assert taken.pair_id == pair.pk
    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.RELEASED
    assert Pair.objects.get(pk=pair.pk).lease_count == 1


def test_own_expired_lease_is_replaced_by_a_fresh_one(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    Assignment.objects.filter(pk=lease.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    fresh = queue_claim.assignment_claim(project=project, annotator=alice)
    assert fresh.pk != lease.pk
    assert fresh.expires_at > timezone.now()
    assert sum(Pair.objects.values_list("lease_count", flat=True)) == 1


# Pair ids far above any the factories hand out in a test, so a test picks its pairs' blocks.
FIRST_TEST_BLOCK = 10_000


def pairs_in_blocks(project, *sizes: int, **fields) -> list[list[Pair]]:
    """Queued pairs in consecutive blocks of the serving order's grouping, ``sizes[i]`` in
    block i, returned in serving order of the blocks (lowest ``claim_key`` first)."""
    blocks = []
    for n, size in enumerate(sizes):
        first = (FIRST_TEST_BLOCK + n) * CLAIM_BLOCK_PAIRS
        blocks.append(
            [
                PairFactory(project=project, id=first + 3 * i, status=PairStatus.QUEUED, **fields)
                for i in range(size)
            ]
        )
    return sorted(blocks, key=lambda block: claim_key(block[0].pk))


def in_own_order(user, pairs_: list[Pair]) -> list[int]:
    """The pairs of one block in the order ``user`` is served them."""
    walk = claim_walk(user.pk)
    return [p.pk for p in sorted(pairs_, key=lambda pair: claim_rank(pair.pk, walk))]


def test_higher_priority_is_served_first_to_everyone(project, alice, bob):
    PairFactory.create_batch(6, project=project, status=PairStatus.QUEUED)
    urgent = PairFactory.create_batch(2, project=project, status=PairStatus.QUEUED, priority=1)
    for user in (alice, bob):
        served = [claim_and_vote(project, user).pk for _ in range(3)]
        assert set(served[:2]) == {p.pk for p in urgent}
        assert served[2] not in {p.pk for p in urgent}


def test_everyone_serves_the_same_block_first_each_in_an_order_of_their_own(project, alice, bob):
    first, second = pairs_in_blocks(project, 6, 6)
    served = {user: [claim_and_vote(project, user).pk for _ in range(6)] for user in (alice, bob)}
    # Both work through the first block before the second, each in their own order: a pair
    # alice has voted on is no reason for bob to take it next.
    for user in (alice, bob):
        assert served[user] == in_own_order(user, first)
    assert claim_and_vote(project, alice).pk in {p.pk for p in second}


def test_orders_within_a_block_differ_across_annotators(project):
    (block,) = pairs_in_blocks(project, 20)
    users = [annotator(project, f"ann{n}") for n in range(3)]
    orders = {tuple(claim_and_vote(project, user).pk for _ in range(5)) for user in users}
    assert len(orders) == 3
    assert orders == {tuple(in_own_order(user, block)[:5]) for user in users}


def test_a_blocks_pairs_finish_before_the_next_block_is_started(project):
    first, second = pairs_in_blocks(project, 4, 4)
    users = [annotator(project, f"ann{n}") for n in range(3)]
    for _ in range(4):
        for user in users:
            claim_and_vote(project, user)
    statuses = dict(Pair.objects.values_list("pk", "status"))
    assert {statuses[p.pk] for p in first} <= {PairStatus.CONSENSUS, PairStatus.DISPUTED}
    assert {statuses[p.pk] for p in second} == {PairStatus.QUEUED}


def test_the_cursor_moves_once_a_block_and_the_walk_wraps_round(project, alice):
    first, second = pairs_in_blocks(project, 2, 2)
    membership = alice.memberships.get(project=project)
    assert membership.claim_cursor is None  # no claim yet: the first block
    claim_and_vote(project, alice)
    membership.refresh_from_db()
    assert membership.claim_cursor == claim_key(first[0].pk)
    with CaptureQueriesContext(connection) as queries:
        claim_and_vote(project, alice)
    assert not [q for q in queries.captured_queries if 'SET "claim_cursor"' in q["sql"]]
    order = in_own_order(alice, second)
    assert claim_and_vote(project, alice).pk == order[0]
    membership.refresh_from_db()
    assert membership.claim_cursor == claim_key(second[0].pk)
    # A pair that opens behind her (a lease someone let expire; here a fresh pair in the
    # first block) is served when her walk wraps round past the last block.
    straggler = PairFactory(project=project, id=first[0].pk + 1, status=PairStatus.QUEUED)
    assert claim_and_vote(project, alice).pk == order[1]
    assert claim_and_vote(project, alice).pk == straggler.pk


def test_a_gold_pair_never_moves_the_block_everyone_works_through(project, alice):
    first, _ = pairs_in_blocks(project, 3, 3)
    claim_and_vote(project, alice)
    # A gold pair in a block of its own, served between two pairs of the first block.
    gold = PairFactory(
        project=project,
        id=(FIRST_TEST_BLOCK + 5) * CLAIM_BLOCK_PAIRS,
        status=PairStatus.QUEUED,
        is_gold=True,
        gold_label="A",
        target_votes=GOLD_TARGET_VOTES,
    )
    project.gold_rate = 1.0
    project.save(update_fields=["gold_rate"])
    assert claim_and_vote(project, alice).pk == gold.pk
    membership = alice.memberships.get(project=project)
    assert membership.claim_cursor == claim_key(first[0].pk)
    assert claim_and_vote(project, alice).pk in {p.pk for p in first}


def test_the_claims_statement_is_prepared_once_per_connection(project, alice, bob, settings):
    settings.ARBITER_STATEMENT_PLANS = "prepare"
    pairs_in_blocks(project, 4)
    for user in (alice, bob):
        with CaptureQueriesContext(connection) as queries:
            claim_and_vote(project, user)
        sqls = [q["sql"] for q in queries.captured_queries]
        assert any(sql.startswith("EXECUTE arbiter_take ") for sql in sqls)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), max(array_length(parameter_types, 1)) FROM pg_prepared_statements"
            " WHERE name = 'arbiter_take'"
        )
        # Each named value bound once: the annotator's conditions name it six times over.
        _, names = named_dollar_placeholders(queue_claim._TAKE_SQL)
        assert cursor.fetchone() == (1, len(names))
        assert len(names) == 12
        assert queue_claim._TAKE_SQL.count("%(") > 40


def test_prepared_function_and_planned_claims_take_the_same_pairs(
    project, alice, settings, django_capture_on_commit_callbacks
):
    (block,) = pairs_in_blocks(project, 6)
    taken, sqls = [], []
    for plans in ("none", "functions", "prepare"):
        settings.ARBITER_STATEMENT_PLANS = plans
        for _ in range(2):
            # The functions are made once the first claim's transaction commits.
            with (
                django_capture_on_commit_callbacks(execute=True),
                CaptureQueriesContext(connection) as queries,
            ):
                taken.append(claim_and_vote(project, alice).pk)
            sqls += [query["sql"] for query in queries.captured_queries]
    assert taken == in_own_order(alice, block)
    assert any(sql.startswith("SELECT * FROM arbiter_take_") for sql in sqls)
    assert any(sql.startswith("EXECUTE arbiter_take ") for sql in sqls)


def test_voted_and_skipped_pairs_are_never_offered_again(project, alice):
    PairFactory.create_batch(3, project=project, status=PairStatus.QUEUED)
    voted = claim_and_vote(project, alice).pk
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    assert lease.pair_id != voted
    queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="broken")
    assert queue_claim.assignment_claim(project=project, annotator=alice).pair_id not in {
        voted,
        lease.pair_id,
    }
    queue_skips.assignment_skip(
        assignment=queue_claim.assignment_claim(project=project, annotator=alice),
        annotator=alice,
        reason="cannot_judge",
    )
    assert queue_claim.assignment_claim(project=project, annotator=alice) is None


def test_only_open_pairs_are_served_and_enqueue_opens_imported_ones(project, alice):
    imported = PairFactory(project=project, status=PairStatus.IMPORTED)
    PairFactory(project=project, status=PairStatus.EASY)
    PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label="A")
    assert queue_claim.assignment_claim(project=project, annotator=alice) is None
    assert pairs.pairs_enqueue(project=project) == 1
    assert queue_claim.assignment_claim(project=project, annotator=alice).pair_id == imported.pk


def test_enqueue_given_pairs_only_and_only_this_projects(project, other_project):
    mine = PairFactory.create_batch(3, project=project)
    theirs = PairFactory(project=other_project)
    assert pairs.pairs_enqueue(project=project, pair_ids=[mine[0].pk, theirs.pk]) == 1
    statuses = dict(Pair.objects.values_list("pk", "status"))
    assert statuses[mine[0].pk] == PairStatus.QUEUED
    assert statuses[mine[1].pk] == statuses[theirs.pk] == PairStatus.IMPORTED


def test_restricted_pairs_go_only_to_the_chosen_annotators(project, alice, bob):
    p1, p2 = PairFactory.create_batch(2, project=project, status=PairStatus.QUEUED, target_votes=1)
    assert pair_services.pairs_restrict(project=project, pair_ids=[p1.pk], annotators=[bob]) == 1
    assert queue_claim.assignment_claim(project=project, annotator=alice).pair_id == p2.pk
    assert queue_claim.assignment_claim(project=project, annotator=bob).pair_id == p1.pk
    assert set(PairRestriction.objects.values_list("pair_id", "annotator_id")) == {(p1.pk, bob.pk)}


def test_lifting_a_restriction_opens_the_pair_to_everyone(project, alice, bob):
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    pair_services.pairs_restrict(project=project, pair_ids=[pair.pk], annotators=[bob])
    assert queue_claim.assignment_claim(project=project, annotator=alice) is None
    assert pair_services.pairs_restrict(project=project, pair_ids=[pair.pk], annotators=[]) == 1
    assert queue_claim.assignment_claim(project=project, annotator=alice).pair_id == pair.pk
    assert not PairRestriction.objects.exists()


def test_restrict_only_to_annotators_of_the_project(project, carol, eve):
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    with pytest.raises(InvalidInput, match=r"annotators: users .* not annotators"):
        pair_services.pairs_restrict(project=project, pair_ids=[pair.pk], annotators=[carol, eve])
    assert not Pair.objects.get(pk=pair.pk).restricted


def test_paused_project_serves_nothing_until_resumed(project, alice, queued_pairs):
    held = queue_claim.assignment_claim(project=project, annotator=alice)
    levers.project_pause(project=project, paused=True)
    assert queue_claim.assignment_claim(project=project, annotator=alice) is None
    assert (
        queue_claim.assignment_claim(project=project, annotator=annotator(project, "zed")) is None
    )
    # A lease held before the pause still takes its vote.
    vote, created = queue_votes.vote_submit(assignment=held, annotator=alice, choice="tie")
    assert created
    assert vote.side == "tie"
    levers.project_pause(project=project, paused=False)
    assert queue_claim.assignment_claim(project=project, annotator=alice) is not None


def _gold(project, n: int):
    return PairFactory.create_batch(
        n, project=project, status=PairStatus.QUEUED, is_gold=True, gold_label="A"
    )


def test_gold_pairs_come_after_the_rest_at_rate_zero(project, alice):
    regular = PairFactory.create_batch(2, project=project, status=PairStatus.QUEUED)
    gold = _gold(project, 1)
    served = [claim_and_vote(project, alice).pk for _ in range(3)]
    assert set(served[:2]) == {regular[0].pk, regular[1].pk}
    assert served[2] == gold[0].pk


def test_gold_pairs_are_mixed_in_at_the_projects_rate(project, alice, monkeypatch):
    monkeypatch.setattr(queue_claim, "random", random.Random(20251130))
    project.gold_rate = 0.25
    project.save(update_fields=["gold_rate"])
    PairFactory.create_batch(80, project=project, status=PairStatus.QUEUED)
    _gold(project, 80)
    served_gold = []
    for _ in range(80):
        lease = queue_claim.assignment_claim(project=project, annotator=alice)
        served_gold.append(lease.pair.is_gold)
        queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="cannot_judge")
    assert 12 <= sum(served_gold) <= 28, sum(served_gold)
    assert served_gold[0] in (True, False)
    assert not all(served_gold[:10])


def test_left_is_randomised_per_assignment(project, alice, monkeypatch):
    monkeypatch.setattr(queue_claim, "random", random.Random(7))
    PairFactory.create_batch(20, project=project, status=PairStatus.QUEUED)
    sides = []
    for _ in range(20):
        lease = queue_claim.assignment_claim(project=project, annotator=alice)
        sides.append(lease.left_is_a)
        queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="cannot_judge")
    assert 5 <= sum(sides) <= 15


def test_only_annotators_can_claim(project, carol, dave, queued_pairs):
    for user in (carol, dave):
        with pytest.raises(NotAllowed):
            queue_claim.assignment_claim(project=project, annotator=user)
    assert not Assignment.objects.exists()


def test_set_priority_changes_only_this_projects_pairs(project, other_project):
    mine = PairFactory(project=project)
    theirs = PairFactory(project=other_project)
    assert (
        pair_services.pairs_set_priority(project=project, pair_ids=[mine.pk, theirs.pk], priority=7)
        == 1
    )
    assert dict(Pair.objects.values_list("pk", "priority")) == {mine.pk: 7, theirs.pk: 0}
    with pytest.raises(InvalidInput, match="priority"):
        pair_services.pairs_set_priority(project=project, pair_ids=[mine.pk], priority=10**6)


def test_release_stuck_leases_frees_their_slots(project, alice, bob):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=2)
    old = queue_claim.assignment_claim(project=project, annotator=alice)
    Assignment.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=45))
    recent = queue_claim.assignment_claim(project=project, annotator=bob)
    assert levers.leases_release(project=project, older_than_minutes=30) == 1
    statuses = dict(Assignment.objects.values_list("pk", "status"))
    assert statuses == {old.pk: "released", recent.pk: "live"}
    assert Pair.objects.get(pk=pair.pk).lease_count == 1
    assert levers.leases_release(project=project, assignment_ids=[recent.pk]) == 1
    assert Pair.objects.get(pk=pair.pk).lease_count == 0


def test_progress_counts_todays_votes_and_what_is_left_for_me(project, alice, bob):
    Project.objects.filter(pk=project.pk).update(min_agree=1)  # one vote decides a pair
    project.refresh_from_db()
    PairFactory.create_batch(4, project=project, status=PairStatus.QUEUED, target_votes=1)
    claim_and_vote(project, alice)
    claim_and_vote(project, alice)
    queue_claim.assignment_claim(project=project, annotator=bob)  # bob holds one slot
    progress = annotator_progress(project=project, annotator=alice)
    assert progress == {"done_today": 2, "done_total": 2, "left": 1}
    assert annotator_progress(project=project, annotator=bob)["left"] == 2


def _claim_queries(project, user) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert queue_claim.assignment_claim(project=project, annotator=user) is not None
    return len(steady_statements(ctx.captured_queries))


def test_claim_takes_a_small_constant_number_of_queries(project):
    PairFactory.create_batch(3, project=project, status=PairStatus.QUEUED)
    # Five statements and a transaction (a savepoint inside the test's transaction): the
    # expired-lease check, the membership lock, the held lease (annotation/queue/statements.py),
    # the slot and the new lease in one statement (annotation/queue/services/claim.py), then the
    # pair's content.
    assert _claim_queries(project, annotator(project, "first")) <= 7
    small = _claim_queries(project, annotator(project, "second"))
    PairFactory.create_batch(60, project=project, status=PairStatus.QUEUED)
    for i in range(6):
        claim_and_vote(project, annotator(project, f"busy{i}"))
    assert _claim_queries(project, annotator(project, "third")) == small


def test_enqueue_command_sends_imported_pairs_of_a_task(project):
    edits = PairFactory.create_batch(2, project=project, task="edit")
    t2i = PairFactory(project=project, task="t2i")
    out = io.StringIO()
    call_command("enqueue", project.slug, "--task", "edit", stdout=out)
    assert "Queued 2 imported pairs of task edit." in out.getvalue()
    statuses = dict(Pair.objects.values_list("pk", "status"))
    assert [statuses[p.pk] for p in edits] == ["queued", "queued"]
    assert statuses[t2i.pk] == "imported"
    call_command("enqueue", project.slug, stdout=out)
    assert Pair.objects.get(pk=t2i.pk).status == "queued"
    with pytest.raises(CommandError, match="--task: no pairs of task 'cartoon'"):
        call_command("enqueue", project.slug, "--task", "cartoon")
    with pytest.raises(CommandError, match="slug: no project 'nope'"):
        call_command("enqueue", "nope")
