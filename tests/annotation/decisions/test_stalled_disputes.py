"""A dispute never waits for an extra vote nobody can give (docs/agreement.md, "Disputes nobody
can answer"): it goes to adjudication when the last vote leaves no annotator who has not voted
on it, and again whenever who may vote changes (a skip, a member removed, re-roled or paused, a
restriction, the cap lowered); the Queue and Overview pages say which disputes wait for whom."""

from __future__ import annotations

import re
from html import unescape

import pytest

from annotation.models import (
    GOLD_MIN_VOTES,
    Assignment,
    Membership,
    Pair,
    PairStatus,
    Project,
    Role,
)
from annotation.pairs import services as pair_services
from annotation.projects.services import member_remove, member_role_change
from annotation.queue.services import levers as queue
from tests.annotation.decisions.conftest import vote_via_api
from tests.annotation.queue.conftest import annotator
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def _split(project, api_for, *, spare: int = 0) -> tuple[Pair, list]:
    """Overlap 3: three annotators vote A, tie and B on the one queued pair, as the
    walk-through did; ``spare`` more annotators of the project have not voted yet."""
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    voters = [annotator(project, f"voter{i}") for i in range(3)]
    spares = [annotator(project, f"spare{i}") for i in range(spare)]
    for user, side in zip(voters, ["A", "tie", "B"], strict=True):
        vote_via_api(api_for(user), project, side)
    pair.refresh_from_db()
    return pair, spares


def test_a_split_with_no_annotator_left_goes_straight_to_adjudication(
    project, carol, api_for, client_for
):
    pair, _ = _split(project, api_for)
    # Not "Annotating, 3 of 4 votes" for good: nobody left could give the fourth.
    assert (pair.status, pair.dispute_reason) == ("disputed", "no_majority")
    assert (pair.vote_count, pair.target_votes, pair.extra_slots) == (3, 3, 0)
    url = f"/api/v1/projects/{project.slug}/pairs/{pair.external_id}/adjudicate/"
    decided = api_for(carol).post(url, {"label": "tie", "note": "both halves"}, format="json")
    assert decided.status_code == 201, decided.content
    assert Pair.objects.get(pk=pair.pk).consensus_label == "tie"


def test_the_queue_and_overview_say_who_a_dispute_waits_for(project, carol, api_for, client_for):
    pair, (spare,) = _split(project, api_for, spare=1)
    assert (pair.status, pair.vote_count, pair.target_votes) == ("annotating", 3, 4)
    curator = client_for(carol)
    queue_page = curator.get(f"/p/{project.slug}/queue/")
    row = re.search(
        r'<table class="table q-disputes">.*?</table>', queue_page.content.decode(), re.S
    )
    assert row is not None
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", row.group(0))).split())
    assert f"{pair.external_id} {pair.task} no_majority 3 of 4 an extra vote from spare0" in text
    assert f'href="/p/{project.slug}/adjudication/"' in queue_page.content.decode()
    overview = _text(curator.get(f"/p/{project.slug}/"))
    assert "1 dispute waiting for an extra vote from spare0: see which" in overview

    # The spare skips it: nobody is left, so the curators decide now.
    claim = api_for(spare).post(f"/api/v1/projects/{project.slug}/claim/")
    assert claim.json()["id"]
    skipped = api_for(spare).post(
        f"/api/v1/assignments/{claim.json()['id']}/skip/", {"reason": "cannot_judge"}, format="json"
    )
    assert skipped.status_code in (200, 201), skipped.content
    pair.refresh_from_db()
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("disputed", 3, 0)
    overview = _text(curator.get(f"/p/{project.slug}/"))
    assert "1 pair disputed: adjudicate" in overview
    assert "waiting for an extra vote" not in overview


@pytest.mark.parametrize("change", ["remove", "re-role", "pause", "restrict"])
def test_a_dispute_goes_to_adjudication_when_its_last_possible_voter_goes(project, api_for, change):
    pair, (spare,) = _split(project, api_for, spare=1)
    assert pair.status == "annotating"
    membership = Membership.objects.get(project=project, user=spare)
    if change == "remove":
        member_remove(membership=membership)
    elif change == "re-role":
        member_role_change(membership=membership, role=Role.RESEARCHER)
    elif change == "pause":
        # The gold check pauses the spare after GOLD_MIN_VOTES wrong gold answers.
        Project.objects.filter(pk=project.pk).update(gold_pause=True, gold_rate=1.0)
        project.refresh_from_db()
        for _ in range(GOLD_MIN_VOTES):
            PairFactory(project=project, status=PairStatus.QUEUED, is_gold=True, gold_label="B")
        for _ in range(GOLD_MIN_VOTES):
            vote_via_api(api_for(spare), project, "A")
        assert Membership.objects.get(pk=membership.pk).paused
    else:
        voter = Pair.objects.get(pk=pair.pk).votes.first().annotator
        pair_services.pairs_restrict(project=project, pair_ids=[pair.pk], annotators=[voter])
    pair.refresh_from_db()
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("disputed", 3, 0)


def test_a_live_lease_on_the_extra_slot_holds_the_dispute_until_released(project, api_for):
    pair, (spare,) = _split(project, api_for, spare=1)
    claim = api_for(spare).post(f"/api/v1/projects/{project.slug}/claim/")
    assert Assignment.objects.get(pk=claim.json()["id"]).pair_id == pair.pk
    member_remove(membership=Membership.objects.get(project=project, user=spare))
    pair.refresh_from_db()
    assert (pair.status, pair.lease_count) == ("annotating", 1)
    assert queue.leases_release(project=project) == 1
    pair.refresh_from_db()
    assert (pair.status, pair.lease_count, pair.target_votes) == ("disputed", 0, 3)


def test_lowering_the_cap_sends_the_dispute_on(project, api_for, carol, client_for):
    pair, _ = _split(project, api_for, spare=1)
    assert pair.status == "annotating"
    Project.objects.filter(pk=project.pk).update(max_extra_votes=0)
    # Re-apply (the walk-through's button) changes the waiting dispute: 1 pair, not 0.
    response = client_for(carol).post(f"/p/{project.slug}/adjudication/reapply/", follow=True)
    assert "re-applied to 1 pairs: changed 1;" in _text(response)
    pair.refresh_from_db()
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("disputed", 3, 0)
