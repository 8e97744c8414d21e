"""The project option "play each response to the end before voting": the server refuses a
vote given before the longest video or audio part of the responses could have played to the
end since the lease began (timed from the lease, not the client), in the API and on the page,
and takes it after; it is set on the Settings page by curators only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from annotation.core.errors import InvalidInput
from annotation.imports.importer import pairs_import
from annotation.models import Assignment, Pair, Vote
from annotation.queue.playback import responses_play_seconds
from annotation.queue.services import claim as queue_claim
from annotation.queue.services import votes as queue_votes
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.media.conftest import audio_write, video_write
from tests.annotation.projects.test_settings_page import settings_data

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def media_pair(project, tmp_path):
    """A queued pair: a 2 s video on one side, a 0.5 s audio clip and text on the other."""
    video_write(tmp_path / "a.mp4", frames=20, audio=False)
    audio_write(tmp_path / "b.wav", seconds=0.5)
    pair = text_pair("av-1", task="t2v")
    pair["response_a"]["response_content"] = [["video", "a.mp4"]]
    pair["response_b"]["response_content"] = [["audio", "b.wav"], ["text", "a sound"]]
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", [pair]), media_root=tmp_path
    )
    Pair.objects.filter(project=project).update(status="queued")
    project.play_to_end = True
    project.save(update_fields=["play_to_end"])
    return Pair.objects.get(project=project)


def _age(lease: Assignment, seconds: float) -> None:
    Assignment.objects.filter(pk=lease.pk).update(
        created_at=timezone.now() - timedelta(seconds=seconds)
    )
    lease.refresh_from_db()


def test_the_time_needed_is_the_longest_timed_part(media_pair, queued_pairs):
    assert responses_play_seconds(pair=media_pair) == pytest.approx(2.0, abs=0.05)
    text_only = Pair.objects.exclude(pk=media_pair.pk).first()
    assert responses_play_seconds(pair=text_only) == 0.0


def test_the_service_refuses_a_vote_before_the_end_and_takes_it_after(alice, media_pair):
    lease = queue_claim.assignment_claim(project=media_pair.project, annotator=alice)
    # The client's own clock says a minute: the server times from the lease.
    with pytest.raises(InvalidInput, match=r"Not played to the end yet.*2\.0 s.*wait"):
        queue_votes.vote_submit(
            assignment=lease, annotator=alice, choice="left", time_on_task_ms=60_000
        )
    _age(lease, 1.5)
    with pytest.raises(InvalidInput, match="wait 1 s more"):
        queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    assert not Vote.objects.exists()
    _age(lease, 2.1)
    _, created = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    assert created


def test_the_option_off_takes_the_vote_at_once(alice, media_pair):
    project = media_pair.project
    project.play_to_end = False
    project.save(update_fields=["play_to_end"])
    lease = queue_claim.assignment_claim(project=project, annotator=alice)
    _, created = queue_votes.vote_submit(assignment=lease, annotator=alice, choice="left")
    assert created


def test_the_api_answers_400_before_the_end_and_201_after(api_for, alice, media_pair):
    api = api_for(alice)
    claimed = api.post("/api/v1/projects/demo/claim/").json()
    # The audio part carries its loudness: a mono 440 Hz sine at half of full scale has a mean
    # square of 0.125 (-9.03 dB); the K-weighting lifts 440 Hz by 0.09 dB at this clip's
    # 16 kHz, and the offset takes 0.691 off: -9.63 LUFS.
    (audio,) = [part for part in claimed["left"] + claimed["right"] if part["type"] == "audio"]
    assert audio["loudness_lufs"] == pytest.approx(-9.63, abs=0.02)
    assignment_id = claimed["id"]
    url = f"/api/v1/assignments/{assignment_id}/vote/"
    early = api.post(url, {"choice": "left", "time_on_task_ms": 90_000}, format="json")
    assert early.status_code == 400
    assert "Not played to the end yet" in str(early.json())
    _age(Assignment.objects.get(pk=assignment_id), 3)
    assert api.post(url, {"choice": "left"}, format="json").status_code == 201
    assert Vote.objects.count() == 1


def test_an_outsider_learns_nothing_of_the_pair(api_for, alice, bob, eve, media_pair):
    assignment_id = api_for(alice).post("/api/v1/projects/demo/claim/").json()["id"]
    for stranger in (eve, bob):  # not a member; a member with another lease
        answer = api_for(stranger).post(
            f"/api/v1/assignments/{assignment_id}/vote/", {"choice": "left"}, format="json"
        )
        assert answer.status_code == 404
        assert "played" not in str(answer.content)
    assert not Vote.objects.exists()


def test_the_page_says_why_the_vote_is_not_taken_yet(client_for, alice, media_pair):
    client = client_for(alice)
    html = client.get(reverse("annotate", args=["demo"])).content.decode()
    assert "play each response to the end before voting" in html
    lease = Assignment.objects.get(annotator=alice)
    url = reverse("annotate-vote", args=["demo", lease.pk])
    refused = client.post(url, {"choice": "left", "time_on_task_ms": "45000"}, **HTMX)
    body = refused.content.decode()
    assert "Not played to the end yet" in body
    assert "wait" in body
    assert f"/annotate/{lease.pk}/vote/" in body  # the same pair, still on screen
    assert not Vote.objects.exists()
    _age(lease, 3)
    client.post(url, {"choice": "left"}, **HTMX)
    assert Vote.objects.filter(annotator=alice).count() == 1


def test_curators_set_it_on_the_settings_page_and_others_cannot(
    client_for, project, alice, carol, dave, eve
):
    url = reverse("project-settings-save", args=["demo"])
    page = client_for(carol).get(reverse("project-settings", args=["demo"])).content.decode()
    assert "Play each response to the end before voting" in page
    client_for(carol).post(url, settings_data(project, play_to_end=True))
    project.refresh_from_db()
    assert project.play_to_end
    # Saving the form without it turns it off again.
    client_for(carol).post(url, settings_data(project))
    project.refresh_from_db()
    assert not project.play_to_end
    for user in (alice, dave, eve):
        answer = client_for(user).post(url, settings_data(project, play_to_end=True))
        assert answer.status_code in (403, 404)
    project.refresh_from_db()
    assert not project.play_to_end


@pytest.mark.django_db(transaction=True)
def test_the_migration_adds_the_option_off_and_the_loudness_empty():
    executor = MigrationExecutor(connection)
    (adding,) = [key for key in executor.loader.graph.nodes if key[1].endswith("_play_to_end")]
    (previous,) = executor.loader.graph.node_map[adding].parents
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate([previous.key])
    try:
        old = executor.loader.project_state([previous.key]).apps
        old.get_model("annotation", "Project").objects.create(slug="before", name="Before")
        executor = MigrationExecutor(connection)
        executor.migrate([adding])
        new = executor.loader.project_state([adding]).apps
        assert (
            new.get_model("annotation", "Project").objects.get(slug="before").play_to_end is False
        )
        assert new.get_model("annotation", "Media")._meta.get_field("loudness_lufs").null
    finally:
        MigrationExecutor(connection).migrate(leaves)
