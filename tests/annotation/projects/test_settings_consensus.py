"""The Settings page and consensus: a dispute's extra votes are the pair's own, never a floor for
the project's overlap; the curator changes the consensus rule there, and saving a new rule
re-applies it as ``apply_consensus`` does (no vote changes, adjudicated labels stay)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.decisions.services import pair_adjudicate
from annotation.models import Pair, PairStatus, Vote
from annotation.projects.services import project_setting_limits
from tests.annotation.decisions.conftest import vote_via_api
from tests.annotation.projects.test_settings_page import page_url, settings_data, text_of
from tests.annotation.queue.conftest import annotator
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db


def _save(client, project, **changes):
    url = reverse("project-settings-save", args=[project.slug])
    return client.post(url, settings_data(project, **changes), follow=True)


def test_settings_save_after_a_dispute_got_its_extra_vote(project, carol, api_for, client_for):
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    voters = [annotator(project, f"voter{i}") for i in range(4)]
    for user, side in zip(voters[:3], ["A", "tie", "B"], strict=True):
        vote_via_api(api_for(user), project, side)
    vote_via_api(api_for(voters[3]), project, "tie")  # the split's extra vote
    pair.refresh_from_db()
    assert (pair.vote_count, pair.target_votes, pair.extra_slots) == (4, 4, 1)
    client = client_for(carol)
    page = client.get(page_url(project)).content.decode()
    assert not re.search(r'name="overlap"[^>]*min="4"', page)

    saved = _save(client, project, guidelines="Look at the hands first.")
    assert "Project settings saved." in text_of(saved)
    project.refresh_from_db()
    assert project.guidelines == "Look at the hands first."
    assert project.overlap == 3
    # Below the three votes of its base overlap is still refused, naming what holds it.
    assert project_setting_limits(project=project).overlap_floor == 3
    refused = _save(client, project, overlap=2, min_agree=2)
    assert refused.status_code == 400
    assert "A pair already has 3 votes and live leases, so the overlap cannot go below 3" in (
        text_of(refused)
    )
    project.refresh_from_db()
    assert project.overlap == 3
    assert Pair.objects.get(pk=pair.pk).target_votes == 4


def test_changing_the_rule_on_settings_reapplies_it(project, carol, api_for, client_for):
    for priority in (2, 1):  # served in this order to everyone
        PairFactory(project=project, status=PairStatus.QUEUED, priority=priority)
    voters = [annotator(project, f"voter{i}") for i in range(3)]
    for pair_sides in (["A", "A", "B"], ["B", "B", "A"]):
        for user, side in zip(voters, pair_sides, strict=True):
            vote_via_api(api_for(user), project, side)
    split, adjudicated = Pair.objects.order_by("-priority")
    Pair.objects.filter(pk=adjudicated.pk).update(status=PairStatus.DISPUTED)
    pair_adjudicate(pair=adjudicated, curator=carol, label="A", note="B misreads the prompt")
    votes_before = sorted(Vote.objects.values_list("pk", "pair_id", "side", "value"))
    client = client_for(carol)
    page = client.get(page_url(project)).content.decode()
    assert re.search(r'<option value="majority" selected>', page)

    saved = _save(client, project, consensus_rule="unanimous", guidelines="Same again.")
    message = text_of(saved)
    assert "Project settings saved. Rule unanimous re-applied to 1 pairs: changed 1;" in message
    assert "1 adjudicated pairs keep their label." in message
    project.refresh_from_db()
    assert project.consensus_rule == "unanimous"
    split.refresh_from_db()
    # Nobody is left for an extra vote (three annotators, all voted): straight to the curators.
    assert (split.status, split.consensus_label, split.dispute_reason) == (
        "disputed",
        "",
        "not_unanimous",
    )
    adjudicated.refresh_from_db()
    assert (adjudicated.status, adjudicated.consensus_label) == ("consensus", "A")
    assert sorted(Vote.objects.values_list("pk", "pair_id", "side", "value")) == votes_before

    # Saving without changing the rule re-applies nothing.
    again = text_of(_save(client, project, consensus_rule="unanimous", name="Renamed"))
    assert "Project settings saved." in again
    assert "re-applied" not in again


def test_a_rule_the_scale_cannot_take_is_refused_naming_the_field(project, carol, client_for):
    refused = _save(client_for(carol), project, consensus_rule="mmrb2")
    assert refused.status_code == 400
    html = refused.content.decode()
    errors = html[html.index('name="consensus_rule"') :]
    assert "The mmrb2 rule reads MMRB2" in errors[: errors.index("</div>")]
    project.refresh_from_db()
    assert project.consensus_rule == "majority"


def test_lowering_the_cap_on_settings_sends_a_waiting_dispute_to_adjudication(
    project, carol, api_for, client_for
):
    pair = PairFactory(project=project, status=PairStatus.QUEUED)
    annotator(project, "spare")  # could still give the extra vote
    for i, side in enumerate(["A", "tie", "B"]):
        vote_via_api(api_for(annotator(project, f"voter{i}")), project, side)
    pair.refresh_from_db()
    assert (pair.status, pair.target_votes) == ("annotating", 4)
    saved = text_of(_save(client_for(carol), project, max_extra_votes=0))
    assert "Project settings saved. 1 dispute went to adjudication" in saved
    pair.refresh_from_db()
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("disputed", 3, 0)
