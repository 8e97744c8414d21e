"""Votes, skips and undo: stored canonically, never lost, never doubled."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.core.errors import Conflict, InvalidInput, NotFound
from annotation.core.limits import UNDO_SECONDS
from annotation.core.scales import canonical_vote, on_screen_vote, options_for
from annotation.models import Assignment, Pair, PairStatus, Skip, Vote
from annotation.queue.services import claim as queue_claim
from annotation.queue.services import levers
from annotation.queue.services import skips as queue_skips
from annotation.queue.services import undo as queue_undo
from annotation.queue.services import votes as queue_votes
from config.errors import status_for
from tests.annotation.queue.conftest import annotator, steady_statements
from tests.factories import PairFactory


def _one_vote_decides(project) -> None:
    """A single vote is a consensus: a pair that reaches a target of one is decided, not
    disputed and given another slot (docs/agreement.md)."""
    project.min_agree = 1
    project.save(update_fields=["min_agree"])


@pytest.mark.parametrize(
    ("scale", "left_is_a", "choice", "value", "side", "canonical"),
    [
        ("binary", True, "left", None, "A", 3),
        ("binary", False, "left", None, "B", 1),
        ("binary", False, "right", None, "A", 3),
        ("ternary", True, "right", None, "B", 1),
        ("ternary", False, "tie", None, "tie", 2),
        ("likert6", True, None, 1, "A", 6),  # left much better, left is A
        ("likert6", False, None, 1, "B", 1),  # left much better, left is B
        ("likert6", True, None, 4, "B", 3),  # right slightly better, right is B
        ("likert6", False, None, 6, "A", 6),  # right much better, right is A
        ("likert6", False, None, 3, "B", 3),  # left slightly better, left is B
    ],
)
def test_on_screen_votes_are_stored_canonically(scale, left_is_a, choice, value, side, canonical):
    assert canonical_vote(scale=scale, left_is_a=left_is_a, choice=choice, value=value) == (
        side,
        canonical,
    )
    shown = on_screen_vote(scale=scale, left_is_a=left_is_a, side=side, value=canonical)
    assert shown == {"choice": choice, "value": value}


@pytest.mark.parametrize(
    ("scale", "choice", "value", "field"),
    [
        ("binary", "tie", None, "choice"),
        ("ternary", "A", None, "choice"),
        ("ternary", None, 2, "value"),
        ("likert6", "left", None, "choice"),
        ("likert6", None, 7, "value"),
        ("likert6", None, 0, "value"),
    ],
)
def test_votes_that_do_not_fit_the_scale_are_refused(project, alice, scale, choice, value, field):
    project.scale = scale
    project.save(update_fields=["scale"])
    PairFactory(project=project, status=PairStatus.QUEUED)
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    with pytest.raises(InvalidInput, match=f"^{field}:"):
        queue_votes.vote_submit(assignment=lease, annotator=alice, choice=choice, value=value)
    assert not Vote.objects.exists()


def test_options_are_in_on_screen_order():
    assert [o["value"] for o in options_for("ternary")] == ["left", "tie", "right"]
    assert [o["arrow"] for o in options_for("ternary")] == ["left", "down", "right"]
    assert [o["value"] for o in options_for("binary")] == ["left", "right"]
    likert = options_for("likert6")
    assert [o["value"] for o in likert] == [1, 2, 3, 4, 5, 6]
    assert likert[0]["label"] == "Left much better"
    assert likert[5]["label"] == "Right much better"
    assert all("A" not in o["label"].split() and "B" not in o["label"].split() for o in likert)


def test_vote_records_order_rationale_and_time(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    vote, created = queue_votes.vote_submit(
        assignment=lease,
        annotator=alice,
        choice="left",
        rationale="  sharper text  ",
        time_on_task_ms=8123,
    )
    assert created
    vote.refresh_from_db()
    assert vote.side == ("A" if lease.left_is_a else "B")
    assert (vote.left_is_a, vote.rationale, vote.time_on_task_ms) == (
        lease.left_is_a,
        "sharper text",
        8123,
    )
    assert (vote.pair_id, vote.assignment_id, vote.is_extra) == (lease.pair_id, lease.pk, False)
    pair = Pair.objects.get(pk=lease.pair_id)
    assert (pair.vote_count, pair.lease_count) == (1, 0)
    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.VOTED


def test_double_submit_is_one_vote(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    first, created = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="tie")
    again, created_again = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="tie")
    assert (created, created_again, again.pk) == (True, False, first.pk)
    assert Vote.objects.count() == 1
    assert Pair.objects.get(pk=lease.pair_id).vote_count == 1


def test_a_different_second_vote_is_refused_and_the_first_kept(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    with pytest.raises(Conflict, match="different answer") as caught:
        queue_votes.vote_submit(assignment=lease, annotator=alice, choice="right")
    assert status_for(caught.value) == 409
    vote = Vote.objects.get()
    assert vote.side == ("A" if lease.left_is_a else "B")


def test_the_same_choice_with_another_reason_says_the_choice_is_recorded(
    project, alice, queued_pairs
):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left", rationale="sharper")
    with pytest.raises(Conflict) as caught:
        queue_votes.vote_submit(
            assignment=lease, annotator=alice, choice="left", rationale="better colours"
        )
    message = str(caught.value)
    assert message.startswith("Your choice on this pair is already recorded")
    assert "different answer" not in message
    assert "To change the reason, undo the vote" in message
    assert f"within {UNDO_SECONDS} seconds" in message
    assert status_for(caught.value) == 409
    assert Vote.objects.get().rationale == "sharper"
    # As the message says: undone, the vote is cast again with the new reason.
    queue_undo.last_action_undo(annotator=alice, project=project)
    again, created = queue_votes.vote_submit(
        assignment=lease, annotator=alice, choice="left", rationale="better colours"
    )
    assert created
    assert again.rationale == "better colours"


def test_only_the_assignments_annotator_may_vote(project, alice, bob, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    with pytest.raises(NotFound):
        queue_votes.vote_submit(assignment=lease, annotator=bob, choice="left")
    assert not Vote.objects.exists()


def test_rationale_is_required_when_the_project_says_so(project, alice, queued_pairs):
    project.require_rationale = True
    project.save(update_fields=["require_rationale"])
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    with pytest.raises(InvalidInput, match=r"^rationale:"):
        queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left", rationale="   ")
    vote, _ = queue_votes.vote_submit(
        assignment=lease, annotator=alice, choice="left", rationale="ok"
    )
    assert vote.rationale == "ok"


def test_late_vote_after_expiry_is_kept_and_counted(project, alice, bob):
    _one_vote_decides(project)
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    late = queue_claim.assignment_claim(project=project, annotator=alice)
    Assignment.objects.filter(pk=late.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    taker = queue_claim.assignment_claim(project=project, annotator=bob)  # frees alice's slot
    assert taker.pair_id == pair.pk
    vote, created = queue_votes.vote_submit(assignment=late, annotator=alice, choice="left")
    assert created
    assert not vote.is_extra
    bobs, _ = queue_votes.vote_submit(assignment=taker, annotator=bob, choice="right")
    assert bobs.is_extra  # the target was reached meanwhile: kept, not counted
    pair.refresh_from_db()
    assert (pair.vote_count, pair.lease_count, pair.votes.count()) == (1, 0, 2)


def test_vote_after_the_target_is_reached_is_kept_as_extra(project, alice, bob, carol):
    _one_vote_decides(project)
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    stuck = queue_claim.assignment_claim(project=project, annotator=alice)
    assert levers.leases_release(project=project) == 1
    lease = queue_claim.assignment_claim(project=project, annotator=bob)
    queue_votes.vote_submit(assignment=lease, annotator=bob, choice="tie")
    extra, created = queue_votes.vote_submit(assignment=stuck, annotator=alice, choice="left")
    assert created
    assert extra.is_extra
    pair.refresh_from_db()
    assert (pair.vote_count, pair.lease_count) == (1, 0)
    assert sorted(pair.votes.values_list("is_extra", flat=True)) == [False, True]


def test_late_vote_closes_a_newer_lease_on_the_same_pair(project, alice):
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    old = queue_claim.assignment_claim(project=project, annotator=alice)
    Assignment.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    new = queue_claim.assignment_claim(project=project, annotator=alice)
    assert new.pair_id == pair.pk
    assert new.pk != old.pk
    queue_votes.vote_submit(assignment=old, annotator=alice, choice="tie")
    assert Assignment.objects.get(pk=new.pk).status == Assignment.Status.RELEASED
    pair.refresh_from_db()
    assert (pair.vote_count, pair.lease_count) == (1, 0)
    _, created = queue_votes.vote_submit(assignment=new, annotator=alice, choice="tie")
    assert not created
    assert Vote.objects.count() == 1


def test_pair_stops_being_served_at_its_target(project):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=2)
    for name in ("ann1", "ann2"):
        user = annotator(project, name)
        lease = queue_claim.assignment_claim(project=project, annotator=user)
        # Both for A whichever side it was shown on, so the two votes agree.
        choice = "left" if lease.left_is_a else "right"
        queue_votes.vote_submit(assignment=lease, annotator=user, choice=choice)
    pair.refresh_from_db()
    assert (pair.vote_count, pair.lease_count, pair.status) == (2, 0, PairStatus.CONSENSUS)
    assert (
        queue_claim.assignment_claim(project=project, annotator=annotator(project, "ann3")) is None
    )


def test_skip_frees_the_slot_and_flags_the_pair(project, alice, bob):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    skip = queue_skips.assignment_skip(
        assignment=lease, annotator=alice, reason="unsafe", note="  gore in image 2 "
    )
    assert (skip.pair_id, skip.reason, skip.note) == (pair.pk, "unsafe", "gore in image 2")
    assert Assignment.objects.get(pk=lease.pk).status == Assignment.Status.SKIPPED
    assert Pair.objects.get(pk=pair.pk).lease_count == 0
    assert queue_claim.assignment_claim(project=project, annotator=alice) is None
    assert queue_claim.assignment_claim(project=project, annotator=bob).pair_id == pair.pk
    assert (
        queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="unsafe").pk
        == skip.pk
    )
    assert Skip.objects.count() == 1


def test_skip_needs_a_known_reason_and_a_skipped_pair_takes_no_vote(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    with pytest.raises(InvalidInput, match=r"^reason:"):
        queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="boring")
    queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="broken")
    with pytest.raises(Conflict, match="skipped"):
        queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")


def test_a_voted_pair_cannot_be_skipped(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    with pytest.raises(Conflict, match="already voted"):
        queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="broken")
    assert not Skip.objects.exists()


def test_undo_within_a_minute_gives_the_pair_back(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    following = queue_claim.assignment_claim(project=project, annotator=alice)
    undone = queue_undo.last_action_undo(annotator=alice, project=project)
    assert undone.assignment.pk == lease.pk
    assert undone.assignment.status == "live"
    assert not Vote.objects.exists()
    pair = Pair.objects.get(pk=lease.pair_id)
    assert (pair.vote_count, pair.lease_count) == (0, 1)
    # A reload shows the undone pair again, same orientation; the vote can be changed.
    assert queue_claim.assignment_claim(project=project, annotator=alice).pk == lease.pk
    vote, created = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="right")
    assert created
    assert vote.side == ("B" if lease.left_is_a else "A")
    assert queue_claim.assignment_claim(project=project, annotator=alice).pk == following.pk


def test_undo_after_a_minute_does_nothing(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    vote, _ = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    Vote.objects.filter(pk=vote.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    assert queue_undo.last_action_undo(annotator=alice, project=project) is None
    assert Vote.objects.filter(pk=vote.pk).exists()
    assert Pair.objects.get(pk=lease.pair_id).vote_count == 1


def test_undo_once_the_pair_has_a_consensus_does_nothing(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    Pair.objects.filter(pk=lease.pair_id).update(status=PairStatus.CONSENSUS, consensus_label="A")
    assert queue_undo.last_action_undo(annotator=alice, project=project) is None
    assert Vote.objects.count() == 1


def test_undo_touches_only_my_votes_in_this_project(project, other_project, alice, bob):
    PairFactory(project=project, status=PairStatus.QUEUED)
    lease = queue_claim.assignment_claim(project=project, annotator=bob)
    queue_votes.vote_submit(assignment=lease, annotator=bob, choice="left")
    assert queue_undo.last_action_undo(annotator=alice, project=project) is None
    assert queue_undo.last_action_undo(annotator=bob, project=other_project) is None
    assert Vote.objects.count() == 1


def test_undo_of_a_skip_gives_the_pair_back_with_its_slot(project, alice, bob):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=2)
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="broken", note="blank")
    assert Pair.objects.get(pk=pair.pk).lease_count == 0
    undone = queue_undo.last_action_undo(annotator=alice, project=project)
    assert (undone.skip.reason, undone.skip.note, undone.vote) == ("broken", "blank", None)
    assert undone.assignment.pk == lease.pk
    assert undone.assignment.status == "live"
    assert not Skip.objects.exists()
    assert Pair.objects.get(pk=pair.pk).lease_count == 1
    # The same orientation again, and the pair takes a vote now.
    assert queue_claim.assignment_claim(project=project, annotator=alice).pk == lease.pk
    queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    assert (Pair.objects.get(pk=pair.pk).vote_count, Pair.objects.get(pk=pair.pk).lease_count) == (
        1,
        0,
    )


def test_undo_of_a_skip_is_refused_once_its_slot_is_taken(project, alice, bob):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_skips.assignment_skip(assignment=lease, annotator=alice, reason="cannot_judge")
    assert queue_claim.assignment_claim(project=project, annotator=bob).pair_id == pair.pk
    assert queue_undo.last_action_undo(annotator=alice, project=project) is None
    assert Skip.objects.count() == 1
    assert Pair.objects.get(pk=pair.pk).lease_count == 1  # bob's, and only his


def test_undo_takes_back_the_latest_action_only(project, alice, queued_pairs):
    voted = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_votes.vote_submit(assignment=voted, annotator=alice, choice="left", rationale="sharper")
    skipped = queue_claim.assignment_claim(project=project, annotator=alice)
    queue_skips.assignment_skip(assignment=skipped, annotator=alice, reason="broken")
    first = queue_undo.last_action_undo(annotator=alice, project=project)
    assert first.assignment.pk == skipped.pk
    assert first.skip is not None
    assert Vote.objects.count() == 1
    second = queue_undo.last_action_undo(annotator=alice, project=project)
    assert second.assignment.pk == voted.pk
    assert second.vote.rationale == "sharper"
    assert not Vote.objects.exists()
    assert not Skip.objects.exists()


def test_votes_sooner_than_the_projects_minimum_are_refused(project, alice, queued_pairs):
    project.min_seconds_per_vote = 5
    project.save(update_fields=["min_seconds_per_vote"])
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    # The client's own clock says a minute: the server times from the lease, not from it.
    with pytest.raises(InvalidInput, match=r"at least 5 s before voting; wait [1-5] s more"):
        queue_votes.vote_submit(
            assignment=lease, annotator=alice, choice="left", time_on_task_ms=60_000
        )
    assert not Vote.objects.exists()
    Assignment.objects.filter(pk=lease.pk).update(created_at=timezone.now() - timedelta(seconds=6))
    lease.refresh_from_db()
    _, created = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    assert created


def test_vote_takes_a_small_constant_number_of_queries(project, alice, queued_pairs):
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    with CaptureQueriesContext(connection) as ctx:
        queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    # The lease closed, the pair's count and the vote in one statement, and the agreement
    # refresh asked for (once per process a few seconds), inside a savepoint of the test's
    # transaction.
    assert len(steady_statements(ctx.captured_queries)) <= 4
