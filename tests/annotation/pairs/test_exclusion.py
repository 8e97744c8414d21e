"""Excluding pairs (docs/curators.md, "Excluding pairs"): a curator takes a pair out, from its
page, the pairs browser or the API; it is never served again, its live leases are released,
and it leaves consensus, releases, agreement, leaderboards and judge scores, while its votes
are kept; including it again restores it as it was."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from annotation.agreement.report import agreement_report_build
from annotation.leaderboard.selectors import model_leaderboard
from annotation.models import Assignment, AuditEvent, Pair, PairStatus, Project, Vote, WebhookEvent
from annotation.pairs.services import pairs_exclude, pairs_include
from annotation.releases.rows import selected_pairs
from annotation.releases.selection import Selection
from judges.evaluation.services import consensus_target, reference_target
from tests.factories import PairFactory, VoteFactory, make_response

pytestmark = pytest.mark.django_db


def claim(api, slug: str = "demo"):
    return api.post(f"/api/v1/projects/{slug}/claim/")


def vote(api, assignment_id: int, choice: str = "left"):
    return api.post(f"/api/v1/assignments/{assignment_id}/vote/", {"choice": choice}, format="json")


def page_url(pair, action: str) -> str:
    return reverse("pair-exclusion", args=[pair.project.slug, pair.pk, action])


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.fixture
def queued(project):
    return PairFactory(project=project, external_id="broken-1", status=PairStatus.QUEUED)


def test_an_excluded_pair_is_never_served_and_its_lease_is_released(
    api_for, client_for, alice, bob, carol, project, queued
):
    held = claim(api_for(alice)).json()["id"]
    response = client_for(carol).post(page_url(queued, "exclude"), {"reason": "video 2 is black"})
    assert response.status_code == 302
    assert response["Location"].endswith("#exclusion")
    queued.refresh_from_db()
    # The claim had made it "annotating": that is the status it keeps for its return.
    assert (queued.status, queued.excluded_from) == (PairStatus.EXCLUDED, PairStatus.ANNOTATING)
    assert (queued.exclusion_reason, queued.lease_count) == ("video 2 is black", 0)
    assert Assignment.objects.get(pk=held).status == Assignment.Status.RELEASED
    # Nobody gets it, not even the annotator who held it.
    assert claim(api_for(alice)).status_code == 204
    assert claim(api_for(bob)).status_code == 204
    page = text_of(client_for(carol).get(reverse("pair", args=["demo", queued.pk])))
    assert "Excluded" in page
    assert "video 2 is black" in page
    assert "it was annotating" in page

    assert client_for(carol).post(page_url(queued, "include")).status_code == 302
    queued.refresh_from_db()
    assert (queued.status, queued.excluded_from, queued.exclusion_reason) == (
        PairStatus.ANNOTATING,
        "",
        "",
    )
    assert claim(api_for(bob)).json()["id"] != held


def test_a_vote_sent_through_a_released_lease_is_kept_and_decides_on_inclusion(
    api_for, carol, alice, project
):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    held = claim(api_for(alice)).json()["id"]
    pairs_exclude(project=project, pair_ids=[pair.pk], reason="prompt is ambiguous", actor=carol)
    assert vote(api_for(alice), held).status_code == 201
    pair.refresh_from_db()
    # Kept and counted, but an excluded pair is never decided.
    assert Vote.objects.filter(pair=pair, annotator=alice).exists()
    assert (pair.status, pair.vote_count, pair.decided_at) == (PairStatus.EXCLUDED, 1, None)
    assert pairs_include(project=project, pair_ids=[pair.pk], actor=carol) == 1
    pair.refresh_from_db()
    # Its last slot was filled while it was out: the rule decides it now.
    assert pair.status not in (PairStatus.QUEUED, PairStatus.ANNOTATING, PairStatus.EXCLUDED)
    assert pair.decided_at is not None


def test_a_late_vote_on_an_excluded_pair_tells_no_webhook_until_it_is_decided(
    api_for, carol, alice, project
):
    """The late vote decides nothing, so nothing is told; including the pair decides it and
    tells it once."""
    Project.objects.filter(pk=project.pk).update(webhooks_active=True)
    project.refresh_from_db()
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    held = claim(api_for(alice)).json()["id"]
    pairs_exclude(project=project, pair_ids=[pair.pk], reason="both identical", actor=carol)
    assert vote(api_for(alice), held).status_code == 201
    assert not WebhookEvent.objects.exists()
    pairs_include(project=project, pair_ids=[pair.pk], actor=carol)
    (event,) = WebhookEvent.objects.all()
    assert event.kind in ("pair.decided", "pair.escalated")
    assert json.loads(event.body)["data"]["pair"]["id"] == pair.external_id


def test_exclusion_and_inclusion_ask_for_the_agreement_report_again(
    carol, project, queued, django_capture_on_commit_callbacks, monkeypatch
):
    asked = []
    monkeypatch.setattr(
        "annotation.pairs.services.agreement_report_request_refresh",
        lambda *, project_id: asked.append(project_id),
    )
    with django_capture_on_commit_callbacks(execute=True):
        pairs_exclude(project=project, pair_ids=[queued.pk], reason="blank", actor=carol)
    with django_capture_on_commit_callbacks(execute=True):
        pairs_include(project=project, pair_ids=[queued.pk], actor=carol)
    assert asked == [project.pk, project.pk]


def test_who_may_exclude(client_for, api_for, alice, dave, eve, carol, project, queued):
    for user, expected in ((eve, 404), (alice, 403), (dave, 403)):
        assert client_for(user).post(page_url(queued, "exclude"), {"reason": "x"}).status_code == (
            expected
        ), user
        api = api_for(user)
        url = "/api/v1/projects/demo/pairs/broken-1/exclude/"
        assert api.post(url, {"reason": "x"}, format="json").status_code == expected, user
        include = "/api/v1/projects/demo/pairs/broken-1/include/"
        assert api.post(include).status_code == expected, user
    queued.refresh_from_db()
    assert queued.status == PairStatus.QUEUED
    assert not AuditEvent.objects.filter(action__startswith="pairs.").exists()


def test_exclusion_posts_need_the_csrf_token(carol, project, queued):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    assert client.post(page_url(queued, "exclude"), {"reason": "x"}).status_code == 403
    queued.refresh_from_db()
    assert queued.status == PairStatus.QUEUED


def test_a_reason_is_required_and_a_refusal_is_shown_on_the_page(client_for, carol, queued):
    response = client_for(carol).post(page_url(queued, "exclude"), {"reason": "   "})
    assert response.status_code == 400
    assert "reason: This field is required." in text_of(response)
    queued.refresh_from_db()
    assert queued.status == PairStatus.QUEUED


def test_pairs_a_filter_run_is_judging_are_refused(client_for, carol, project):
    judging = PairFactory(project=project, external_id="j-1", status=PairStatus.JUDGING)
    response = client_for(carol).post(page_url(judging, "exclude"), {"reason": "blank"})
    assert response.status_code == 400
    assert "j-1: a filter run is judging them" in text_of(response)
    judging.refresh_from_db()
    assert judging.status == PairStatus.JUDGING


def test_the_reason_is_escaped(client_for, carol, queued):
    script = "<script>alert(1)</script>"
    client_for(carol).post(page_url(queued, "exclude"), {"reason": script})
    html = client_for(carol).get(reverse("pair", args=["demo", queued.pk])).content.decode()
    assert script not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_api_excludes_and_includes_and_answers_the_pair(api_for, carol, project, queued):
    api = api_for(carol)
    response = api.post(
        "/api/v1/projects/demo/pairs/broken-1/exclude/", {"reason": "both identical"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["excluded_from"], body["exclusion_reason"]) == (
        "excluded",
        "queued",
        "both identical",
    )
    refused = api.post("/api/v1/projects/demo/pairs/broken-1/exclude/", {}, format="json")
    assert refused.status_code == 400
    assert "reason" in refused.json()
    listed = api.get("/api/v1/projects/demo/pairs/?status=excluded").json()
    assert [pair["id"] for pair in listed["results"]] == ["broken-1"]
    back = api.post("/api/v1/projects/demo/pairs/broken-1/include/").json()
    assert (back["status"], back["excluded_from"], back["excluded_at"]) == ("queued", "", None)


def test_the_browser_excludes_the_ticked_pairs_and_filters_them(client_for, carol, project):
    chosen = [
        PairFactory(project=project, external_id=f"b-{n}", status=PairStatus.QUEUED)
        for n in range(3)
    ]
    url = reverse("pairs-bulk", args=["demo", "exclude"])
    data = {"pair": [chosen[0].pk, chosen[1].pk], "reason": "media broken"}
    assert client_for(carol).post(url, data).status_code == 302
    statuses = dict(Pair.objects.values_list("external_id", "status"))
    assert statuses == {"b-0": "excluded", "b-1": "excluded", "b-2": "queued"}
    listed = client_for(carol).get(reverse("pairs", args=["demo"]), {"status": "excluded"})
    assert "b-0" in text_of(listed)
    assert "b-2" not in text_of(listed)
    missing = client_for(carol).post(url, {"pair": [chosen[2].pk]})
    assert missing.status_code == 400
    assert "reason" in text_of(missing)
    include = reverse("pairs-bulk", args=["demo", "include"])
    assert client_for(carol).post(include, {"pair": [chosen[0].pk]}).status_code == 302
    assert Pair.objects.get(external_id="b-0").status == PairStatus.QUEUED


def test_an_excluded_pair_leaves_every_figure(project, alice, bob, carol):
    """Releases, agreement, the model leaderboard and judge scores count only included pairs;
    including the pair gives its consensus back."""

    def decided(name: str, *, a: str, b: str, label: str = "A"):
        pair = PairFactory(
            project=project,
            external_id=name,
            status=PairStatus.CONSENSUS,
            consensus_label=label,
            prior_label=label,
            response_a=make_response(project, a, f"{name} one"),
            response_b=make_response(project, b, f"{name} two"),
        )
        for annotator in (alice, bob):
            VoteFactory(pair=pair, annotator=annotator, side=label)
        return pair

    kept = decided("kept", a="m1", b="m2")
    out = decided("out", a="m3", b="m4")

    def figures():
        return {
            "release": sorted(
                selected_pairs(project, Selection()).values_list("external_id", flat=True)
            ),
            "agreement_votes": agreement_report_build(project=project)["votes"],
            "leaderboard_pairs": model_leaderboard(project=project, rounds=0).pairs,
            "consensus_target": sorted(item.external_id for item in consensus_target(project)),
            "reference_target": sorted(item.external_id for item in reference_target(project)),
        }

    before = figures()
    assert before["release"] == ["kept", "out"]
    assert before["agreement_votes"] == 4
    pairs_exclude(project=project, pair_ids=[out.pk], reason="mislabelled models", actor=carol)
    assert figures() == {
        "release": ["kept"],
        "agreement_votes": 2,
        "leaderboard_pairs": 1,
        "consensus_target": ["kept"],
        "reference_target": ["kept"],
    }
    assert kept.pk != out.pk
    pairs_include(project=project, pair_ids=[out.pk], actor=carol)
    out.refresh_from_db()
    assert (out.status, out.consensus_label) == (PairStatus.CONSENSUS, "A")
    assert figures() == before


def test_a_pair_whose_id_ends_in_an_action_word_is_its_own_get(api_for, alice, eve, carol, project):
    """A pair's id is a path: ``t2v/exclude`` is a pair whose GET shares its URL with the
    exclusion of ``t2v``; the GET is the pair, the POST the action (docs/api.md, "Pairs")."""
    for word in ("exclude", "include", "adjudicate"):
        PairFactory(project=project, external_id=f"t2v/{word}")
    PairFactory(project=project, external_id="t2v", status=PairStatus.QUEUED)
    api = api_for(carol)
    for word in ("exclude", "include", "adjudicate"):
        shown = api.get(f"/api/v1/projects/demo/pairs/t2v/{word}/")
        assert shown.status_code == 200, word
        assert shown.json()["id"] == f"t2v/{word}"
    assert api.get("/api/v1/projects/demo/pairs/t2v/nothing/exclude/").status_code == 404
    excluded = api.post(
        "/api/v1/projects/demo/pairs/t2v/exclude/exclude/", {"reason": "broken"}, format="json"
    )
    assert (excluded.status_code, excluded.json()["id"]) == (200, "t2v/exclude")
    assert Pair.objects.get(external_id="t2v").status == PairStatus.QUEUED
    # The GET is the pair endpoint's, with its access rule: an annotator is answered as for
    # any other pair, an outsider finds nothing.
    for user in (alice, eve):
        plain = api_for(user).get("/api/v1/projects/demo/pairs/t2v/").status_code
        assert plain in (403, 404)
        assert api_for(user).get("/api/v1/projects/demo/pairs/t2v/exclude/").status_code == plain
    assert api_for(eve).get("/api/v1/projects/demo/pairs/t2v/exclude/").status_code == 404
    schema = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    for word in ("exclude", "include", "adjudicate"):
        action = schema["paths"][f"/api/v1/projects/{{slug}}/pairs/{{external_id}}/{word}/"]
        assert set(action) - {"parameters"} == {"post"}, word
