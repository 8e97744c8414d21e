"""Flags on a pair: raised beside a vote or while skipping, one open per annotator and pair,
answered and resolved by curators, with the database's constraints behind the services."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.core.errors import Conflict, InvalidInput, NotFound
from annotation.flags.selectors import annotator_flags, open_flag_count, pair_flags
from annotation.flags.services import flag_raise, flag_reply, flag_resolve
from annotation.models import Assignment, Flag, FlagComment, PairStatus, Skip, Vote
from annotation.queue.services.claim import assignment_claim
from annotation.queue.services.flags import assignment_flag
from annotation.queue.services.votes import vote_submit
from tests.factories import PairFactory


@pytest.fixture
def lease(project, alice):
    PairFactory(project=project, status=PairStatus.QUEUED)
    return assignment_claim(project=project, annotator=alice)


def test_a_flag_keeps_the_vote_to_give(lease, alice, project):
    flag, created = flag_raise(assignment=lease, annotator=alice, kind="broken_media", note=" x ")
    assert created
    assert flag.note == "x"
    assert flag.is_open
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.LIVE
    # The same lease is still hers, and the vote counts as ever.
    assert assignment_claim(project=project, annotator=alice).pk == lease.pk
    vote_submit(assignment=lease, annotator=alice, choice="left")
    assert Vote.objects.filter(annotator=alice).count() == 1
    assert open_flag_count(project=project) == 1


def test_a_flag_after_the_vote(lease, alice):
    vote_submit(assignment=lease, annotator=alice, choice="tie")
    lease.refresh_from_db()
    flag, created = flag_raise(assignment=lease, annotator=alice, kind="identical")
    assert created
    assert flag.pair_id == lease.pair_id
    assert Vote.objects.get().side == "tie"


def test_flag_and_skip(lease, alice, project):
    _flag, created, skip = assignment_flag(
        assignment=lease, annotator=alice, kind="broken_media", note="video 2 is black", skip=True
    )
    assert created
    assert skip is not None
    assert (skip.reason, skip.note) == (Skip.Reason.BROKEN, "video 2 is black")
    assert assignment_claim(project=project, annotator=alice) is None  # never offered again
    other = PairFactory(project=project, status=PairStatus.QUEUED)
    second = assignment_claim(project=project, annotator=alice)
    assert second.pair_id == other.pk
    _, _, skip = assignment_flag(
        assignment=second, annotator=alice, kind="ambiguous_prompt", skip=True
    )
    assert skip.reason == Skip.Reason.CANNOT_JUDGE


def test_a_refused_skip_leaves_no_flag(lease, alice):
    vote_submit(assignment=lease, annotator=alice, choice="left")
    lease.refresh_from_db()
    with pytest.raises(Conflict, match="already voted"):
        assignment_flag(assignment=lease, annotator=alice, kind="identical", skip=True)
    assert not Flag.objects.exists()


@pytest.mark.parametrize(
    ("kind", "note", "field"),
    [
        ("meh", "", "kind"),
        ("other", "   ", "note"),
        ("broken_media", "x" * 2001, "note"),
    ],
)
def test_bad_flags_name_the_field(lease, alice, kind, note, field):
    with pytest.raises(InvalidInput, match=rf"^{field}:"):
        flag_raise(assignment=lease, annotator=alice, kind=kind, note=note)
    assert not Flag.objects.exists()


def test_one_open_flag_per_annotator_and_pair(lease, alice, bob, project):
    first, _ = flag_raise(assignment=lease, annotator=alice, kind="identical", note="same text")
    again, created = flag_raise(
        assignment=lease, annotator=alice, kind="identical", note="same text"
    )
    assert (again.pk, created) == (first.pk, False)
    with pytest.raises(Conflict, match="already"):
        flag_raise(assignment=lease, annotator=alice, kind="other", note="something else")
    # Someone else's assignment is not hers to flag.
    with pytest.raises(NotFound):
        flag_raise(assignment=lease, annotator=bob, kind="identical")
    # Once resolved, she may flag the pair again.
    flag_resolve(flag=first, by=None)
    _, created = flag_raise(assignment=lease, annotator=alice, kind="other", note="still wrong")
    assert created
    assert Flag.objects.filter(annotator=alice).count() == 2


def test_reply_and_resolve(lease, alice, carol):
    flag, _ = flag_raise(assignment=lease, annotator=alice, kind="ambiguous_prompt")
    with pytest.raises(InvalidInput, match=r"^text:"):
        flag_reply(flag=flag, author=carol, text="  ")
    with pytest.raises(InvalidInput, match=r"^text:"):
        flag_reply(flag=flag, author=carol, text="x" * 5001)
    flag_reply(flag=flag, author=carol, text="Judge the first sentence only.")
    assert flag.is_open
    flag_reply(flag=flag, author=carol, text="Fixed in the guidelines.", resolve=True)
    flag.refresh_from_db()
    assert flag.resolved_by == carol
    assert not flag.is_open
    assert not flag_resolve(flag=flag, by=carol)  # resolved already: nothing changes
    [shown] = pair_flags(pair=lease.pair)
    assert [c.text for c in shown.comments.all()] == [
        "Judge the first sentence only.",
        "Fixed in the guidelines.",
    ]
    assert [f.pk for f in annotator_flags(project=lease.pair.project, annotator=alice)] == [flag.pk]


def test_constraints_hold_in_the_database(lease, alice, carol):
    pair = lease.pair
    Flag.objects.create(pair=pair, annotator=alice, kind="identical")
    for bad in (
        {"kind": "identical"},  # a second open flag
        {"kind": "nonsense", "resolved_at": "2026-01-01T00:00:00Z"},
        {"kind": "other", "note": "", "resolved_at": "2026-01-01T00:00:00Z"},
        {"kind": "identical", "resolved_by": carol},  # a resolver but not resolved
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Flag.objects.create(pair=pair, annotator=alice, **bad)
    with pytest.raises(IntegrityError), transaction.atomic():
        FlagComment.objects.create(flag=Flag.objects.get(), author=carol, text="")
