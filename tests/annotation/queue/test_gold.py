"""Quality control with gold pairs (docs/agreement.md, "Gold pairs"): curators mark them on the
queue page, every annotator answers each once at the project's rate, blinded; an annotator
below the accuracy threshold is flagged and, when the project says so, paused until a curator
unpauses them."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import (
    GOLD_MIN_VOTES,
    GOLD_TARGET_VOTES,
    Assignment,
    Membership,
    Pair,
    PairStatus,
    Vote,
)
from annotation.projects.services import project_setting_limits
from annotation.queue.selectors import queue_overview
from tests.annotation.queue.conftest import annotator, secret_pair
from tests.factories import PairFactory, VoteFactory

# The CSRF token (64 letters and digits) and the CSP nonce are random: one in a few thousand
# holds "gold" by chance. They are blanked before a page is searched for the word; a word or
# an attribute that names gold pairs is never 20 letters and digits long without a break.
_RANDOM_TOKEN = re.compile(r"[A-Za-z0-9+/=]{20,}")


def _without_random_tokens(response) -> str:
    return _RANDOM_TOKEN.sub("<token>", response.content.decode()).lower()


PAYLOAD_KEYS = {"id", "expires_at", "prompt", "left", "right", "criterion", "options"}


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def action_url(project, action: str) -> str:
    return reverse("curator-queue-action", args=[project.slug, action])


def mark_gold(client, project, pairs, label: str):
    ids = ", ".join(pair.external_id for pair in pairs)
    return client.post(
        action_url(project, "gold"), {"gold-pair_ids": ids, "gold-label": label}, follow=True
    )


def claim(api, project):
    return api.post(f"/api/v1/projects/{project.slug}/claim/")


def answer(api, project, *, right: bool):
    """Claims the next pair over the API and answers it, rightly or not, the way an
    annotator would: in left/right terms (the test reads which side is A from the database)."""
    response = claim(api, project)
    assert response.status_code == 200, response.content
    assignment = Assignment.objects.select_related("pair").get(pk=response.json()["id"])
    pair = assignment.pair
    assert pair.is_gold
    # The side shown on the left is A exactly when left_is_a.
    a_is_right = pair.gold_label == "A"
    choice = "left" if assignment.left_is_a == (a_is_right == right) else "right"
    voted = api.post(f"/api/v1/assignments/{assignment.pk}/vote/", {"choice": choice})
    assert voted.status_code == 201, voted.content
    return response


@pytest.fixture
def gold_project(project, carol):
    """Serves gold first (rate 1), threshold 70%, six gold pairs marked through the page."""
    project.gold_rate = 1.0
    project.save(update_fields=["gold_rate"])
    gold = [secret_pair(project, n) for n in range(6)]
    client = Client()
    client.force_login(carol)
    response = mark_gold(client, project, gold[:3], "A")
    assert "3 gold pairs with the answer A." in text_of(response)
    mark_gold(client, project, gold[3:], "B")
    return project


def test_a_gold_pair_is_answered_once_by_every_annotator(api_for, gold_project):
    pair = Pair.objects.filter(project=gold_project, is_gold=True).order_by("pk").first()
    Pair.objects.filter(project=gold_project, is_gold=True).exclude(pk=pair.pk).delete()
    assert (pair.gold_label, pair.target_votes) == ("A", GOLD_TARGET_VOTES)
    # More annotators than the overlap (3): each gets the gold pair, once.
    people = [annotator(gold_project, f"annotator{n}") for n in range(5)]
    for person in people:
        api = api_for(person)
        answer(api, gold_project, right=True)
        assert claim(api, gold_project).status_code == 204
    assert Vote.objects.filter(pair=pair, is_extra=False).count() == 5
    pair.refresh_from_db()
    assert (pair.vote_count, pair.lease_count, pair.status) == (5, 0, PairStatus.ANNOTATING)


def test_gold_is_served_at_the_projects_rate(api_for, project, carol):
    project.gold_rate = 0.25
    project.save(update_fields=["gold_rate"])
    PairFactory.create_batch(150, project=project, status=PairStatus.QUEUED)
    gold = PairFactory.create_batch(150, project=project, status=PairStatus.QUEUED)
    client = Client()
    client.force_login(carol)
    mark_gold(client, project, gold, "A")
    served = []
    for n in range(3):
        api = api_for(annotator(project, f"annotator{n}"))
        for _ in range(40):
            response = claim(api, project)
            assignment = Assignment.objects.select_related("pair").get(pk=response.json()["id"])
            served.append(assignment.pair.is_gold)
            api.post(f"/api/v1/assignments/{assignment.pk}/vote/", {"choice": "tie"})
    # 120 claims at p = 0.25: 30 expected, sd 4.7; the bounds are about four sd away.
    assert 12 <= sum(served) <= 48, sum(served)


def test_annotators_never_learn_a_pair_is_gold(api_for, client_for, gold_project, alice):
    regular = secret_pair(gold_project, 99)
    response = claim(api_for(alice), gold_project)
    payload = response.json()
    assert set(payload) == PAYLOAD_KEYS
    assert Assignment.objects.get(pk=payload["id"]).pair.is_gold
    text = json.dumps(payload).lower()
    assert "gold" not in text
    page = client_for(alice).get(reverse("annotate", args=[gold_project.slug]))
    assert page.status_code == 200
    assert "gold" not in _without_random_tokens(page)
    # The pair listing that says is_gold is for curators and researchers only.
    assert api_for(alice).get(f"/api/v1/projects/{gold_project.slug}/pairs/").status_code == 403
    # A gold pair's payload has the same shape as an ordinary one's.
    Pair.objects.filter(project=gold_project, is_gold=True).delete()
    Pair.objects.filter(pk=regular.pk).update(priority=1)
    bob = annotator(gold_project, "zed")
    ordinary = claim(api_for(bob), gold_project).json()
    assert set(ordinary) == set(payload)
    assert [set(part) for part in ordinary["left"]] == [set(part) for part in payload["left"]]
    assert ordinary["options"] == payload["options"]


def test_below_threshold_is_flagged_but_not_paused_by_default(
    api_for, client_for, gold_project, carol
):
    api = api_for(annotator(gold_project, "annotator3"))
    for right in (True, False, True, False, False, False):
        answer(api, gold_project, right=right)
    page = text_of(client_for(carol).get(reverse("curator-queue", args=[gold_project.slug])))
    assert "annotator3: 2 of 6 gold pairs right (33%) — below 70%" in page
    assert "Unpause annotator3" not in page
    assert not Membership.objects.get(user__username="annotator3").paused


def test_too_few_gold_votes_are_not_judged(api_for, client_for, gold_project, carol):
    api = api_for(annotator(gold_project, "annotator3"))
    gold_project.gold_pause = True
    gold_project.save(update_fields=["gold_pause"])
    for _ in range(GOLD_MIN_VOTES - 1):
        answer(api, gold_project, right=False)
    assert claim(api, gold_project).status_code == 200
    page = text_of(client_for(carol).get(reverse("curator-queue", args=[gold_project.slug])))
    assert "annotator3 4 0 0% too few gold votes yet" in page
    assert "gold pairs right" not in page


def test_below_threshold_pauses_when_the_project_says_so_until_unpaused(
    api_for, client_for, gold_project, carol
):
    gold_project.gold_pause = True
    gold_project.save(update_fields=["gold_pause"])
    user = annotator(gold_project, "annotator3")
    api = api_for(user)
    # Right, wrong, right, wrong, wrong: 2 of 5 (40%) after the fifth gold vote.
    for right in (True, False, True, False, False):
        answer(api, gold_project, right=right)
    assert Membership.objects.get(user=user).paused
    assert claim(api, gold_project).status_code == 204
    page = client_for(user).get(reverse("annotate", args=[gold_project.slug]))
    assert "Your annotation is paused by the curators;" in text_of(page)
    assert "gold" not in _without_random_tokens(page)
    # Another annotator is not affected.
    assert claim(api_for(annotator(gold_project, "annotator4")), gold_project).status_code == 200

    client = client_for(carol)
    queue_page = text_of(client.get(reverse("curator-queue", args=[gold_project.slug])))
    assert "annotator3: 2 of 5 gold pairs right (40%) — below 70% paused" in queue_page
    response = client.post(
        action_url(gold_project, "unpause"), {"unpause-annotator": user.pk}, follow=True
    )
    assert "annotator3 can annotate again" in text_of(response)
    assert "Unpause annotator3" not in text_of(response)
    assert not Membership.objects.get(user=user).paused
    # Judged afresh: one more wrong gold answer does not pause them again.
    answer(api, gold_project, right=False)
    assert not Membership.objects.get(user=user).paused
    assert claim(api, gold_project).status_code in (200, 204)


def test_the_vote_with_next_that_pauses_claims_no_next_pair(api_for, gold_project):
    """The one-call loop answers as the two calls would: the vote that pauses the annotator
    is kept, and the claim in its transaction sees the pause (next is null)."""
    gold_project.gold_pause = True
    gold_project.save(update_fields=["gold_pause"])
    user = annotator(gold_project, "annotator3")
    api = api_for(user)
    for right in (True, False, True, False):
        answer(api, gold_project, right=right)
    held = Assignment.objects.select_related("pair").get(pk=claim(api, gold_project).json()["id"])
    wrong = "right" if held.left_is_a == (held.pair.gold_label == "A") else "left"
    voted = api.post(
        f"/api/v1/assignments/{held.pk}/vote/", {"choice": wrong, "next": True}, format="json"
    )
    assert voted.status_code == 201, voted.content
    assert voted.json()["next"] is None
    assert Membership.objects.get(user=user).paused
    assert Vote.objects.filter(annotator=user).count() == GOLD_MIN_VOTES
    assert not Assignment.objects.filter(annotator=user, status=Assignment.Status.LIVE).exists()


def test_the_vote_that_pauses_shows_the_message_on_the_comparison_page(client_for, gold_project):
    gold_project.gold_pause = True
    gold_project.save(update_fields=["gold_pause"])
    user = annotator(gold_project, "annotator3")
    client = client_for(user)
    page = reverse("annotate", args=[gold_project.slug])
    for _ in range(GOLD_MIN_VOTES):
        client.get(page)
        held = Assignment.objects.select_related("pair").get(
            annotator=user, status=Assignment.Status.LIVE
        )
        # Always the side that is not the gold label: 0 of 5 right.
        wrong = "right" if held.left_is_a == (held.pair.gold_label == "A") else "left"
        response = client.post(
            reverse("annotate-vote", args=[gold_project.slug, held.pk]),
            {"choice": wrong},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200
    fragment = text_of(response)
    assert "Your annotation is paused by the curators;" in fragment
    assert "gold" not in _without_random_tokens(response)
    assert not Assignment.objects.filter(annotator=user, status=Assignment.Status.LIVE).exists()


def test_unpausing_someone_not_paused_names_the_field(client_for, carol, alice, project):
    response = client_for(carol).post(
        action_url(project, "unpause"), {"unpause-annotator": alice.pk}
    )
    assert response.status_code == 400
    assert "Select a valid choice" in text_of(response)


def test_who_may_mark_gold_and_unpause(client_for, alice, dave, eve, project, carol):
    pair = secret_pair(project, 0)
    Membership.objects.filter(user=alice).update(paused=True)
    for user, status in ((alice, 403), (dave, 403), (eve, 404)):
        client = client_for(user)
        gold = client.post(
            action_url(project, "gold"), {"gold-pair_ids": pair.external_id, "gold-label": "A"}
        )
        unpause = client.post(action_url(project, "unpause"), {"unpause-annotator": alice.pk})
        assert (gold.status_code, unpause.status_code) == (status, status)
    queue_page = client_for(alice).get(reverse("curator-queue", args=[project.slug]))
    assert queue_page.status_code == 403
    pair.refresh_from_db()
    assert not pair.is_gold
    assert Membership.objects.get(user=alice).paused


def test_gold_forms_need_the_csrf_token(carol, project):
    pair = secret_pair(project, 0)
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    client.get(reverse("curator-queue", args=[project.slug]))
    token = client.cookies["csrftoken"].value
    data = {"gold-pair_ids": pair.external_id, "gold-label": "B"}
    assert client.post(action_url(project, "gold"), data).status_code == 403
    pair.refresh_from_db()
    assert not pair.is_gold
    response = client.post(action_url(project, "gold"), {**data, "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    pair.refresh_from_db()
    assert (pair.is_gold, pair.gold_label) == (True, "B")


def test_marking_gold_refuses_what_it_cannot_do(client_for, carol, alice, project):
    voted, fresh = secret_pair(project, 0), secret_pair(project, 1)
    easy = PairFactory(project=project, status=PairStatus.EASY)
    VoteFactory(pair=voted, annotator=alice)
    client = client_for(carol)
    refused = mark_gold(client, project, [fresh, voted, easy], "A")
    assert refused.status_code == 400
    assert (
        f"pair_ids: {voted.external_id}, {easy.external_id}: only pairs nobody has voted on,"
        " imported or queued, can become gold." in text_of(refused)
    )
    unknown = client.post(action_url(project, "gold"), {"gold-pair_ids": "nope", "gold-label": "A"})
    assert "No pair with id nope in this project." in text_of(unknown)
    # Nothing half-done: the fresh pair in the refused batch is not gold either.
    assert not Pair.objects.filter(is_gold=True).exists()
    # A tie is an answer only on a ternary scale.
    project.scale = "binary"
    project.save(update_fields=["scale"])
    tie = mark_gold(client, project, [fresh], "tie")
    assert tie.status_code == 400
    assert "Select a valid choice" in text_of(tie)


def test_a_gold_label_can_be_corrected_and_an_unanswered_gold_pair_cleared(
    api_for, client_for, carol, gold_project
):
    client = client_for(carol)
    gold = list(Pair.objects.filter(project=gold_project, is_gold=True).order_by("pk"))
    api = api_for(annotator(gold_project, "annotator3"))
    answered = Pair.objects.get(
        pk=Assignment.objects.get(pk=answer(api, gold_project, right=True).json()["id"]).pair_id
    )
    corrected = mark_gold(
        client, gold_project, [answered], "B" if answered.gold_label == "A" else "A"
    )
    assert "1 gold pair with the answer" in text_of(corrected)
    refused = mark_gold(client, gold_project, [answered], "clear")
    assert refused.status_code == 400
    assert "annotators answered them as gold pairs; correct the label instead." in text_of(refused)
    unanswered = [pair for pair in gold if pair.pk != answered.pk]
    cleared = mark_gold(client, gold_project, unanswered, "clear")
    assert "5 pairs no longer gold." in text_of(cleared)
    targets = set(
        Pair.objects.filter(pk__in=[p.pk for p in unanswered]).values_list(
            "is_gold", "gold_label", "target_votes"
        )
    )
    assert targets == {(False, "", gold_project.overlap)}


def test_gold_pairs_stay_out_of_targets_and_the_overlap_floor(api_for, gold_project):
    for n in range(4):
        answer(api_for(annotator(gold_project, f"annotator{n}")), gold_project, right=True)
    PairFactory(project=gold_project, status=PairStatus.ANNOTATING, vote_count=1)
    overview = queue_overview(project=gold_project)
    assert (overview["open_votes"], overview["open_target"]) == (1, gold_project.overlap)
    assert project_setting_limits(project=gold_project).overlap_floor == 1


def test_settings_page_sets_the_threshold_and_pausing(client_for, carol, project):
    from tests.annotation.projects.test_settings_page import settings_data

    url = reverse("project-settings-save", args=[project.slug])
    client = client_for(carol)
    bad = client.post(url, settings_data(project, gold_min_accuracy=1.5))
    assert bad.status_code == 400
    assert "less than or equal to 1.0" in text_of(bad)
    saved = client.post(url, settings_data(project, gold_min_accuracy=0.8, gold_pause="on"))
    assert saved.status_code == 302
    project.refresh_from_db()
    assert (project.gold_min_accuracy, project.gold_pause) == (0.8, True)
