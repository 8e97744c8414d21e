"""Flags over REST: an annotator flags her assignment and reads the replies to her own flags;
curators list, reply and resolve; outsiders get 404 and the wrong role 403 on every endpoint,
and nothing an annotator receives names another annotator, a model or a vote."""

from __future__ import annotations

import json

import pytest

from annotation.models import Flag, Skip, Vote
from tests.annotation.queue.conftest import (
    SECRET_EXTERNAL,
    SECRET_MODEL_A,
    SECRET_MODEL_B,
    secret_pair,
)
from tests.factories import MembershipFactory


def claim(api):
    return api.post("/api/v1/projects/demo/claim/").json()["id"]


def flag(api, assignment_id: int, **body):
    return api.post(f"/api/v1/assignments/{assignment_id}/flag/", body, format="json")


@pytest.fixture
def flagged(api_for, project, alice, bob):
    """alice and bob each flagged the same pair; bob voted on it too."""
    secret_pair(project)
    alices = claim(api_for(alice))
    assert (
        flag(api_for(alice), alices, kind="broken_media", note="<b>image 2</b>").status_code == 201
    )
    bobs_api = api_for(bob)
    bobs = claim(bobs_api)
    bobs_api.post(f"/api/v1/assignments/{bobs}/vote/", {"choice": "left"}, format="json")
    assert flag(bobs_api, bobs, kind="identical", note="BOB-PRIVATE").status_code == 201
    return Flag.objects.get(annotator=alice), Flag.objects.get(annotator=bob)


def test_flag_beside_a_vote_and_with_a_skip(api_for, project, alice):
    secret_pair(project, 0)
    secret_pair(project, 1)
    api = api_for(alice)
    first = claim(api)
    response = flag(api, first, kind="ambiguous_prompt", note="which lighthouse?")
    assert response.status_code == 201
    body = response.json()
    assert (body["kind"], body["skipped"], body["assignment"]) == ("ambiguous_prompt", False, first)
    assert flag(api, first, kind="ambiguous_prompt", note="which lighthouse?").status_code == 200
    conflict = flag(api, first, kind="identical")
    assert conflict.status_code == 409
    assert "already" in conflict.json()["detail"]
    assert claim(api) == first  # the lease is still hers: flagging used no vote
    voted = api.post(f"/api/v1/assignments/{first}/vote/", {"choice": "tie"}, format="json")
    assert voted.status_code == 201
    second = claim(api)
    skipped = flag(api, second, kind="broken_media", skip=True)
    assert skipped.status_code == 201
    assert skipped.json()["skipped"] is True
    assert Skip.objects.get(annotator=alice).reason == "broken"
    assert Vote.objects.filter(annotator=alice).count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "nope"}, "kind"),
        ({}, "kind"),
        ({"kind": "other"}, "note"),
        ({"kind": "identical", "note": "x" * 2001}, "note"),
        ({"kind": "identical", "colour": "red"}, "colour"),
    ],
)
def test_bad_flags_are_400_naming_the_field(api_for, project, alice, body, field):
    secret_pair(project)
    api = api_for(alice)
    response = flag(api, claim(api), **body)
    assert response.status_code == 400
    assert field in json.dumps(response.json())
    assert not Flag.objects.exists()


def test_flagging_someone_elses_assignment(api_for, project, alice, bob, carol, eve):
    secret_pair(project)
    alices = claim(api_for(alice))
    for user in (bob, carol, eve):
        assert flag(api_for(user), alices, kind="identical").status_code == 404
    assert not Flag.objects.exists()


def test_my_flags_show_only_mine_and_the_replies_to_them(api_for, flagged, carol):
    alices, bobs = flagged
    curator = api_for(carol)
    reply = curator.post(
        f"/api/v1/projects/demo/flags/{alices.pk}/replies/",
        {"text": "Re-imported the image.", "resolve": True},
        format="json",
    )
    assert reply.status_code == 201
    assert reply.json()["resolved_by"] == "carol"
    curator.post(
        f"/api/v1/projects/demo/flags/{bobs.pk}/replies/", {"text": "FOR-BOB-ONLY"}, format="json"
    )
    mine = api_for(alices.annotator).get("/api/v1/projects/demo/my-flags/")
    assert mine.status_code == 200
    [row] = mine.json()
    assert row["kind"] == "broken_media"
    assert row["resolved_at"]
    assert [r["text"] for r in row["replies"]] == ["Re-imported the image."]
    assert row["prompt"].startswith("Draw a lighthouse")
    text = mine.content.decode()
    secrets = ("bob", "BOB-PRIVATE", "FOR-BOB-ONLY", "left", SECRET_EXTERNAL, SECRET_MODEL_A)
    for secret in (*secrets, SECRET_MODEL_B):
        assert secret not in text


def test_curators_list_reply_and_resolve(api_for, flagged, carol, dave):
    alices, bobs = flagged
    curator = api_for(carol)
    listed = curator.get("/api/v1/projects/demo/flags/")
    assert [(f["annotator"], f["kind"]) for f in listed.json()] == [
        ("alice", "broken_media"),
        ("bob", "identical"),
    ]
    assert listed.json()[0]["note"] == "<b>image 2</b>"  # JSON, as written
    resolved = curator.post(f"/api/v1/projects/demo/flags/{bobs.pk}/resolve/")
    assert resolved.status_code == 200
    assert resolved.json()["resolved_by"] == "carol"
    assert curator.post(f"/api/v1/projects/demo/flags/{bobs.pk}/resolve/").status_code == 200
    assert [f["id"] for f in curator.get("/api/v1/projects/demo/flags/").json()] == [alices.pk]
    assert [
        f["id"] for f in curator.get("/api/v1/projects/demo/flags/", {"state": "resolved"}).json()
    ] == [bobs.pk]
    assert len(curator.get("/api/v1/projects/demo/flags/", {"state": "all"}).json()) == 2
    bad_state = curator.get("/api/v1/projects/demo/flags/", {"state": "closed"})
    assert bad_state.status_code == 400
    assert "state" in bad_state.json()["detail"]
    empty = curator.post(
        f"/api/v1/projects/demo/flags/{alices.pk}/replies/", {"text": ""}, format="json"
    )
    assert empty.status_code == 400
    assert "text" in empty.json()
    # Researchers read the list, and only that.
    assert api_for(dave).get("/api/v1/projects/demo/flags/").status_code == 200


def test_who_may_do_what(api_for, flagged, other_project, alice, carol, dave, eve):
    alices, _ = flagged
    reply = f"/api/v1/projects/demo/flags/{alices.pk}/replies/"
    resolve = f"/api/v1/projects/demo/flags/{alices.pk}/resolve/"
    for user, expected in ((eve, 404), (alice, 403), (dave, 403)):
        api = api_for(user)
        assert api.post(reply, {"text": "hi"}, format="json").status_code == expected
        assert api.post(resolve).status_code == expected
    assert api_for(eve).get("/api/v1/projects/demo/flags/").status_code == 404
    assert api_for(alice).get("/api/v1/projects/demo/flags/").status_code == 403
    assert api_for(eve).get("/api/v1/projects/demo/my-flags/").status_code == 404
    assert api_for(carol).get("/api/v1/projects/demo/my-flags/").status_code == 403
    # A flag of this project asked for through another project the curator also curates: 404.
    MembershipFactory(project=other_project, user=carol, role="curator")
    elsewhere = f"/api/v1/projects/{other_project.slug}/flags/{alices.pk}/resolve/"
    assert api_for(carol).post(elsewhere).status_code == 404
    alices.refresh_from_db()
    assert alices.is_open
    assert not alices.comments.exists()


def test_schema_documents_the_flag_endpoints(client, alice):
    client.force_login(alice)
    paths = client.get("/api/v1/schema/", {"format": "json"}).json()["paths"]
    for path in (
        "/api/v1/assignments/{id}/flag/",
        "/api/v1/projects/{slug}/my-flags/",
        "/api/v1/projects/{slug}/flags/",
        "/api/v1/projects/{slug}/flags/{id}/replies/",
        "/api/v1/projects/{slug}/flags/{id}/resolve/",
    ):
        assert path in paths, path
    assert {"200", "201", "400", "409"} <= set(
        paths["/api/v1/assignments/{id}/flag/"]["post"]["responses"]
    )
