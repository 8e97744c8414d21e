"""The queue over REST: claim, vote, skip, undo; what annotators see, and who may do what."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotation.agreement import services as refresh
from annotation.models import Assignment, Pair, PairStatus, Skip, Vote
from annotation.queue.api import VoteApi
from tests.annotation.queue.conftest import (
    SECRET_EXTERNAL,
    SECRET_JUDGE,
    SECRET_MODEL_A,
    SECRET_MODEL_B,
    annotator,
    secret_pair,
    steady_statements,
)
from tests.factories import PairFactory

PAYLOAD_KEYS = {"id", "expires_at", "prompt", "left", "right", "criterion", "options"}


def claim(api, slug: str = "demo"):
    return api.post(f"/api/v1/projects/{slug}/claim/")


def vote(api, assignment_id: int, **body):
    return api.post(f"/api/v1/assignments/{assignment_id}/vote/", body, format="json")


def test_claim_returns_the_blinded_assignment(api_for, alice, project, queued_pairs):
    response = claim(api_for(alice))
    assert response.status_code == 200
    data = response.json()
    assert set(data) == PAYLOAD_KEYS
    assignment = Assignment.objects.get(pk=data["id"])
    assert assignment.annotator == alice
    pair = assignment.pair
    left, right = (
        (pair.response_a, pair.response_b)
        if assignment.left_is_a
        else (pair.response_b, pair.response_a)
    )
    assert data["left"] == left.content
    assert data["right"] == right.content
    assert data["prompt"] == pair.prompt.content
    assert [o["value"] for o in data["options"]] == ["left", "tie", "right"]


def test_the_vote_answers_as_its_serializer_renders_it(api_for, alice, project, queued_pairs):
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    answer = vote(api, assignment_id, choice="right", rationale="sharper", time_on_task_ms=900)
    assert answer.status_code == 201
    saved = Vote.objects.get(pk=answer.json()["id"])
    assignment = saved.assignment
    rendered = VoteApi.VoteSerializer(
        {
            "id": saved.pk,
            "assignment": assignment.pk,
            "choice": "right",
            "value": None,
            "rationale": "sharper",
            "time_on_task_ms": 900,
            "created_at": saved.created_at,
        }
    ).data
    assert answer.json() == json.loads(json.dumps(rendered))
    assert answer.json()["created_at"].endswith("Z")


def test_claim_again_returns_the_same_assignment(api_for, alice, project, queued_pairs):
    api = api_for(alice)
    assert claim(api).json()["id"] == claim(api).json()["id"]
    assert Assignment.objects.count() == 1


def test_claim_with_nothing_left_is_204(api_for, alice, project):
    response = claim(api_for(alice))
    assert response.status_code == 204
    assert response.content == b""


def test_vote_201_then_200_for_the_same_vote(api_for, alice, project, queued_pairs):
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    first = vote(api, assignment_id, choice="left", rationale="crisper", time_on_task_ms=4200)
    assert first.status_code == 201
    assert first.json()["choice"] == "left"
    assert first.json()["rationale"] == "crisper"
    again = vote(api, assignment_id, choice="left", rationale="crisper", time_on_task_ms=4300)
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Vote.objects.count() == 1
    changed = vote(api, assignment_id, choice="right", rationale="crisper")
    assert changed.status_code == 409
    assert "different answer" in changed.json()["detail"]
    reason = vote(api, assignment_id, choice="left", rationale="crisper, and centred")
    assert reason.status_code == 409
    assert reason.json()["detail"].startswith("Your choice on this pair is already recorded")
    assert "undo the vote" in reason.json()["detail"]


def test_vote_with_next_answers_the_next_assignment_as_the_claim_would(
    api_for, alice, project, queued_pairs
):
    api = api_for(alice)
    first = claim(api).json()
    answer = vote(api, first["id"], choice="left", next=True)
    assert answer.status_code == 201
    data = answer.json()
    assert data["choice"] == "left"
    assert data["assignment"] == first["id"]
    upcoming = data["next"]
    assert set(upcoming) == PAYLOAD_KEYS
    lease = Assignment.objects.get(pk=upcoming["id"])
    assert lease.status == Assignment.Status.LIVE
    assert lease.annotator == alice
    assert lease.pair_id != Assignment.objects.get(pk=first["id"]).pair_id
    # The claim endpoint, asked now, answers the same assignment, byte for byte.
    assert claim(api).json() == upcoming
    # A retry of the same vote with next: 200, the same vote and the same live lease.
    again = vote(api, first["id"], choice="left", next=True)
    assert again.status_code == 200
    assert again.json()["id"] == data["id"]
    assert again.json()["next"]["id"] == upcoming["id"]
    assert Assignment.objects.filter(annotator=alice).count() == 2
    # Without next, the answer is as it always was.
    plain = vote(api, upcoming["id"], choice="tie")
    assert plain.status_code == 201
    assert "next" not in plain.json()


def test_vote_with_next_is_null_when_nothing_is_left(api_for, alice, project):
    PairFactory(project=project, status=PairStatus.QUEUED)
    api = api_for(alice)
    answer = vote(api, claim(api).json()["id"], choice="right", next=True)
    assert answer.status_code == 201
    assert answer.json()["next"] is None
    project.paused = True
    project.save(update_fields=["paused"])
    PairFactory(project=project, status=PairStatus.QUEUED)
    again = vote(api, Assignment.objects.get().pk, choice="right", next=True)
    assert again.status_code == 200
    assert again.json()["next"] is None
    assert Assignment.objects.count() == 1


def test_a_refused_vote_with_next_claims_nothing(api_for, alice, project, queued_pairs):
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    bad = vote(api, assignment_id, choice="sideways", next=True)
    assert bad.status_code == 400
    assert vote(api, assignment_id, choice="left").status_code == 201
    conflict = vote(api, assignment_id, choice="right", next=True)
    assert conflict.status_code == 409
    assert "next" not in conflict.json()
    assert Assignment.objects.filter(annotator=alice).count() == 1
    assert vote(api, assignment_id, choice="left", next="maybe").status_code == 400


def test_likert6_vote_in_on_screen_terms(api_for, alice, project, queued_pairs):
    project.scale = "likert6"
    project.save(update_fields=["scale"])
    api = api_for(alice)
    data = claim(api).json()
    assert [o["value"] for o in data["options"]] == [1, 2, 3, 4, 5, 6]
    response = vote(api, data["id"], value=2)
    assert response.status_code == 201
    assert response.json()["value"] == 2
    stored = Vote.objects.get()
    assert stored.value == (5 if stored.left_is_a else 2)
    assert stored.side == ("A" if stored.left_is_a else "B")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "non_field_errors"),
        ({"choice": "sideways"}, "choice"),
        ({"value": 3}, "value"),
        ({"choice": "left", "time_on_task_ms": -5}, "time_on_task_ms"),
    ],
)
def test_bad_votes_are_400_naming_the_field(api_for, alice, project, queued_pairs, body, field):
    api = api_for(alice)
    response = vote(api, claim(api).json()["id"], **body)
    assert response.status_code == 400
    assert field in json.dumps(response.json())
    assert not Vote.objects.exists()


def test_skip_and_never_see_the_pair_again(api_for, alice, project):
    PairFactory(project=project, status=PairStatus.QUEUED)
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    response = api.post(
        f"/api/v1/assignments/{assignment_id}/skip/",
        {"reason": "broken", "note": "image 2 does not load"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["reason"] == "broken"
    assert Skip.objects.get().note == "image 2 does not load"
    assert claim(api).status_code == 204
    bad = api.post(f"/api/v1/assignments/{assignment_id}/skip/", {"reason": "meh"}, format="json")
    assert bad.status_code == 400
    assert "reason" in bad.json()


def test_undo_gives_the_pair_back_then_has_nothing_to_undo(api_for, alice, project, queued_pairs):
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    vote(api, assignment_id, choice="tie")
    undone = api.post("/api/v1/projects/demo/undo/")
    assert undone.status_code == 200
    assert set(undone.json()) == PAYLOAD_KEYS | {"undone"}
    assert undone.json()["id"] == assignment_id
    assert undone.json()["undone"] == {
        "action": "vote",
        "choice": "tie",
        "value": None,
        "label": "About the same",
        "rationale": "",
    }
    assert not Vote.objects.exists()
    nothing = api.post("/api/v1/projects/demo/undo/")
    assert nothing.status_code == 409
    assert "60 seconds" in nothing.json()["detail"]
    assert vote(api, assignment_id, choice="left").status_code == 201


def test_undo_of_a_skip_gives_the_pair_back(api_for, alice, project):
    PairFactory(project=project, status=PairStatus.QUEUED)
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    api.post(
        f"/api/v1/assignments/{assignment_id}/skip/",
        {"reason": "broken", "note": "the <b>right</b> image is blank"},
        format="json",
    )
    assert claim(api).status_code == 204
    undone = api.post("/api/v1/projects/demo/undo/")
    assert undone.status_code == 200
    assert undone.json()["id"] == assignment_id
    assert undone.json()["undone"] == {
        "action": "skip",
        "reason": "broken",
        "label": "Broken content",
        "note": "the <b>right</b> image is blank",
    }
    assert not Skip.objects.exists()
    assert vote(api, assignment_id, choice="left").status_code == 201


@pytest.mark.parametrize("left_is_a", [True, False])
@pytest.mark.parametrize(
    ("scale", "answer", "label"),
    [
        ("binary", {"choice": "right"}, "Right is better"),
        ("ternary", {"choice": "left"}, "Left is better"),
        ("likert6", {"value": 2}, "Left better"),
        ("likert6", {"value": 6}, "Right much better"),
    ],
)
def test_undo_returns_the_earlier_vote_as_it_was_on_screen(
    api_for, alice, project, scale, answer, label, left_is_a
):
    """Whichever response was on the left, the undone vote comes back in the terms it was
    sent in, never as A/B."""
    project.scale = scale
    project.save(update_fields=["scale"])
    PairFactory(project=project, status=PairStatus.QUEUED)
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    Assignment.objects.filter(pk=assignment_id).update(left_is_a=left_is_a)
    sent = vote(api, assignment_id, **answer, rationale="sharper edges")
    assert sent.status_code == 201
    undone = api.post("/api/v1/projects/demo/undo/").json()["undone"]
    assert undone == {
        "action": "vote",
        "choice": answer.get("choice"),
        "value": answer.get("value"),
        "label": label,
        "rationale": "sharper edges",
    }
    # What came back can be sent again as it is.
    again = {key: undone[key] for key in ("choice", "value") if undone[key] is not None}
    assert vote(api, assignment_id, **again).status_code == 201


def test_a_vote_faster_than_the_projects_minimum_is_400(api_for, alice, project, queued_pairs):
    project.min_seconds_per_vote = 20
    project.save(update_fields=["min_seconds_per_vote"])
    api = api_for(alice)
    assignment_id = claim(api).json()["id"]
    response = vote(api, assignment_id, choice="left", time_on_task_ms=90_000)
    assert response.status_code == 400
    assert "wait" in str(response.json())
    assert not Vote.objects.exists()


def _strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_nothing_an_annotator_receives_reveals_models_sides_or_judges(
    api_for, client_for, alice, project
):
    project.scale = "likert6"
    project.save(update_fields=["scale"])
    for n in range(2):
        secret_pair(project, n, with_images=True)
    api = api_for(alice)
    received = []
    first = claim(api)
    received.append(first)
    assignment_id = first.json()["id"]
    received.append(vote(api, assignment_id, value=5))
    received.append(vote(api, assignment_id, value=5))
    received.append(api.post("/api/v1/projects/demo/undo/"))
    received.append(vote(api, assignment_id, value=1, next=True))
    second = claim(api)
    received.append(second)
    received.append(
        api.post(f"/api/v1/assignments/{second.json()['id']}/skip/", {"reason": "unsafe"})
    )
    for response in received:
        assert response.status_code in (200, 201), response.content
        text = response.content.decode()
        for secret in (SECRET_MODEL_A, SECRET_MODEL_B, SECRET_JUDGE, SECRET_EXTERNAL):
            assert secret not in text
        for marker in ("response_a", "response_b", "model_name", "ensemble", "is_gold", "status"):
            assert marker not in text
        strings = set(_strings(response.json()))
        assert not strings & {"A", "B", "a", "b", "easy", "queued", "annotating"}
    # Image parts are opaque, project-scoped URLs the annotator can fetch.
    urls = [p["url"] for p in first.json()["left"] + first.json()["prompt"] if p["type"] == "image"]
    assert len(urls) == 2
    assert all("/p/demo/media/" in url for url in urls)
    assert all(client_for(alice).get(url).status_code == 200 for url in urls)


def test_media_of_a_project_is_not_served_to_annotators_of_another(
    client_for, api_for, alice, project, other_project
):
    secret_pair(project, with_images=True)
    url = claim(api_for(alice)).json()["prompt"][1]["url"]
    stranger = annotator(other_project, "mallory")
    assert client_for(stranger).get(url).status_code == 404


def test_annotator_of_another_project_cannot_claim_or_vote_here(
    api_for, alice, project, other_project, queued_pairs
):
    mallory = annotator(other_project, "mallory")
    PairFactory(project=other_project, status=PairStatus.QUEUED)
    assert claim(api_for(mallory)).status_code == 404
    alices = claim(api_for(alice)).json()["id"]
    assert vote(api_for(mallory), alices, choice="left").status_code == 404
    skip = api_for(mallory).post(f"/api/v1/assignments/{alices}/skip/", {"reason": "broken"})
    assert skip.status_code == 404
    assert api_for(mallory).post("/api/v1/projects/demo/undo/").status_code == 404
    assert not Vote.objects.exists()
    assert not Skip.objects.exists()


def test_someone_elses_assignment_is_404(api_for, alice, bob, project, queued_pairs):
    alices = claim(api_for(alice)).json()["id"]
    assert vote(api_for(bob), alices, choice="left").status_code == 404
    assert not Vote.objects.exists()


def test_outsiders_get_404_and_other_roles_403(api_for, project, carol, dave, eve, queued_pairs):
    assert claim(api_for(eve)).status_code == 404
    assert api_for(eve).post("/api/v1/projects/demo/undo/").status_code == 404
    assert claim(api_for(carol)).status_code == 403
    assert claim(api_for(dave)).status_code == 403
    assert claim(APIClient()).status_code in (401, 403)
    assert not Assignment.objects.exists()


@pytest.mark.parametrize("wants_next", [False, True])
def test_the_votes_token_read_with_its_assignment_refuses_as_the_token_check_does(
    api_for, alice, project, queued_pairs, wants_next
):
    """The vote reads the token with the assignment (VoteTokenAuthentication): the same 401s
    as every other endpoint, 404 for an assignment that is not the voter's (or none), 403
    once the voter no longer annotates the project; the session sees the same."""
    from annotation.models import Membership, Role

    assignment = claim(api_for(alice)).json()["id"]
    body = {"choice": "left", "next": True} if wants_next else {"choice": "left"}

    def vote_as(api, pk=assignment):
        return api.post(f"/api/v1/assignments/{pk}/vote/", body, format="json")

    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    refused = vote_as(stranger)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "Invalid token."
    assert vote_as(api_for(alice), pk=assignment + 1000).status_code == 404
    assert vote_as(api_for(alice), pk=10**30).status_code == 404  # beyond any bigint id
    api = api_for(alice)
    Membership.objects.filter(user=alice).update(role=Role.CURATOR)
    assert vote_as(api).status_code == 403
    session = APIClient()
    session.force_login(alice)
    assert vote_as(session).status_code == 403
    Membership.objects.filter(user=alice).update(role=Role.ANNOTATOR)
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    inactive = vote_as(api)
    assert inactive.status_code == 401
    assert inactive.json()["detail"] == "User inactive or deleted."
    assert not Vote.objects.exists()
    alice.is_active = True
    alice.save(update_fields=["is_active"])
    accepted = vote_as(api)
    assert accepted.status_code == 201, accepted.content
    assert ("next" in accepted.json()) == wants_next


def test_superuser_who_is_not_an_annotator_cannot_claim(api_for, project, queued_pairs):
    from tests.factories import UserFactory

    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    assert claim(api_for(root)).status_code == 403


def test_session_posts_need_the_csrf_token(alice, project, queued_pairs):
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(alice)
    refused = api.post("/api/v1/projects/demo/claim/")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert not Assignment.objects.exists()


def test_paused_project_claims_204(api_for, alice, project, queued_pairs):
    project.paused = True
    project.save(update_fields=["paused"])
    assert claim(api_for(alice)).status_code == 204


def _queries(call) -> int:
    """The statements ``call`` runs, leaving out the occasional ones."""
    with CaptureQueriesContext(connection) as ctx:
        response = call()
    assert response.status_code in (200, 201), response.content
    return len(steady_statements(ctx.captured_queries))


def test_claim_and_vote_queries_stay_constant(api_for, alice, bob, project, monkeypatch):
    # One clock reading for the whole test: the agreement refresh is asked for once, by the
    # first vote, however slowly the test runs (annotation/agreement/services.py).
    monkeypatch.setattr(refresh.time, "monotonic", lambda: 1000.0)
    PairFactory.create_batch(3, project=project, status=PairStatus.QUEUED)
    api = api_for(alice)
    # A claim: the token, the project's access check, then the claim's own (test_queue.py):
    # expired leases looked for, and in its transaction the membership locked and the
    # held lease, or a slot with its lease and content, in one statement.
    assert _queries(lambda: claim(api)) <= 7
    # A vote: the token with the assignment and its access check (one statement), the
    # vote's one statement and its transaction, and the refresh asked for.
    lease = Assignment.objects.latest("pk").pk
    assert _queries(lambda: vote(api, lease, choice="left")) <= 5
    # More pairs, votes and annotators do not add queries.
    small_claim = _queries(lambda: claim(api))
    lease = Assignment.objects.latest("pk").pk
    small_vote = _queries(lambda: vote(api, lease, choice="tie"))
    assert small_claim <= 7
    assert small_vote <= 4
    PairFactory.create_batch(50, project=project, status=PairStatus.QUEUED)
    for i in range(5):
        other = api_for(annotator(project, f"busy{i}"))
        vote(other, claim(other).json()["id"], choice="right")
    api = api_for(bob)
    assert _queries(lambda: claim(api)) == small_claim
    lease = Assignment.objects.latest("pk").pk
    # The busy annotators' votes may have brought this pair to its last vote (which pair
    # each meets first follows their ids): room for more, so this vote decides nothing.
    Pair.objects.filter(assignments__pk=lease).update(target_votes=10)
    assert _queries(lambda: vote(api, lease, choice="tie")) == small_vote
    # The vote that claims the next pair runs both in one request and one transaction: less
    # the second request's token and access lookups, the claim's look for expired leases
    # (read with the token), and one BEGIN and COMMIT. Six statements in all.
    # Whether a vote ends its pair depends on the order each annotator meets the pairs in
    # (their ids): the pair is given room for more votes, so this one does not.
    lease = claim(api).json()["id"]
    Pair.objects.filter(assignments__pk=lease).update(target_votes=10)
    with_next = _queries(lambda: vote(api, lease, choice="left", next=True))
    assert with_next == small_claim + small_vote - 5 == 6
    # A vote that ends its pair adds the decision's two: the pair's values read, the
    # decision written (annotation/decisions/services.py, pair_complete). With no extra
    # votes allowed, a split goes to adjudication without asking who is left to vote.
    project.max_extra_votes = 0
    project.save(update_fields=["max_extra_votes"])
    lease = Assignment.objects.latest("pk").pk
    Pair.objects.filter(assignments__pk=lease).update(target_votes=F("vote_count") + 1)
    ending = _queries(lambda: vote(api, lease, choice="left", next=True))
    assert ending == with_next + 2
    decided = Pair.objects.get(assignments__pk=lease).status
    assert decided in (PairStatus.CONSENSUS, PairStatus.DISPUTED)


def test_schema_documents_the_queue_endpoints(client, alice):
    client.force_login(alice)
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    for path in (
        "/api/v1/projects/{slug}/claim/",
        "/api/v1/projects/{slug}/undo/",
        "/api/v1/assignments/{id}/vote/",
        "/api/v1/assignments/{id}/skip/",
    ):
        assert path in schema["paths"], path
    vote_responses = schema["paths"]["/api/v1/assignments/{id}/vote/"]["post"]["responses"]
    assert {"200", "201", "400", "409"} <= set(vote_responses)
    undo_ok = schema["paths"]["/api/v1/projects/{slug}/undo/"]["post"]["responses"]["200"]
    undo_schema = undo_ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    undone_ref = schema["components"]["schemas"][undo_schema]["properties"]["undone"]
    undone = schema["components"]["schemas"][undone_ref["allOf"][0]["$ref"].rsplit("/", 1)[-1]]
    assert {"action", "choice", "value", "label", "rationale", "reason", "note"} == set(
        undone["properties"]
    )
    assert Pair.objects.count() == 0
