"""Each event kind is written by the service that makes its change (docs/webhooks.md,
"Events"): a vote that decides a pair or sends it to adjudication, a pair flagged, an import
that finishes or fails, a filter run that finishes, a release built or published; and received as
documented."""

from __future__ import annotations

import json

import pytest

from annotation.imports.services import import_job_submit
from annotation.models import SUBSCRIBABLE_EVENTS, Project
from annotation.releases.services import release_publish
from annotation.webhooks.delivery import webhook_deliveries_send_due
from judges.runs import services as runs
from tests.annotation.imports.conftest import jsonl_bytes, text_pair, upload
from tests.annotation.releases.conftest import built_release
from tests.factories import PairFactory
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    make_judges,
    use_scripted_judges,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def received(receiver, hooked):
    """The events the project's one endpoint (taking every kind) received, as JSON."""
    target = receiver()
    hooked(target.url, events=SUBSCRIBABLE_EVENTS)

    def events() -> list[dict]:
        webhook_deliveries_send_due()
        return [json.loads(request.body) for request in target.requests]

    return events


def _vote(api, choice: str) -> None:
    claimed = api.post("/api/v1/projects/demo/claim/")
    assert claimed.status_code == 200, claimed.content
    answer = api.post(f"/api/v1/assignments/{claimed.json()['id']}/vote/", {"choice": choice})
    assert answer.status_code == 201, answer.content


def test_the_vote_that_decides_a_pair_sends_pair_decided(project, alice, api_for, received):
    Project.objects.filter(pk=project.pk).update(overlap=1, min_agree=1)
    PairFactory(project=project, external_id="v1", status="queued", target_votes=1, task="t2i")
    _vote(api_for(alice), "left")
    (event,) = received()
    assert event["type"] == "pair.decided"
    assert event["data"]["pair"] == {"id": "v1", "task": "t2i"}
    assert event["data"]["label"] in ("A", "B")
    assert event["data"]["by"] == "votes"


def test_a_dispute_nobody_can_answer_sends_pair_escalated(project, alice, bob, api_for, received):
    Project.objects.filter(pk=project.pk).update(overlap=2, min_agree=2, max_extra_votes=0)
    PairFactory(project=project, external_id="d1", status="queued", target_votes=2, task="t2i")
    _vote(api_for(alice), "left")
    _vote(api_for(bob), "tie")
    (event,) = received()
    assert event["type"] == "pair.escalated"
    assert event["data"]["pair"]["id"] == "d1"
    assert event["data"]["reason"]


def test_a_new_flag_sends_pair_flagged_once(project, alice, api_for, received):
    PairFactory(project=project, external_id="f1", status="queued", task="t2i")
    api = api_for(alice)
    assignment = api.post("/api/v1/projects/demo/claim/").json()["id"]
    for _ in range(2):  # the same flag again is no new event
        api.post(f"/api/v1/assignments/{assignment}/flag/", {"kind": "identical", "note": "same"})
    (event,) = received()
    assert event["type"] == "pair.flagged"
    assert event["data"]["pair"] == {"id": "f1", "task": "t2i"}
    assert event["data"]["flag"]["kind"] == "identical"
    assert event["data"]["flag"]["note"] == "same"
    assert "alice" not in json.dumps(event)


def test_an_import_sends_import_finished_or_import_failed(project, carol, received):
    good = jsonl_bytes([text_pair("i1"), text_pair("i2")])
    import_job_submit(project=project, user=carol, upload=upload("good.jsonl", good))
    bad = jsonl_bytes([text_pair("i3"), "{not json"])
    import_job_submit(project=project, user=carol, upload=upload("bad.jsonl", bad))
    finished, failed = sorted(received(), key=lambda event: event["type"], reverse=True)
    assert finished["type"] == "import.finished"
    assert finished["data"]["import"]["filename"] == "good.jsonl"
    assert finished["data"]["import"]["created_pairs"] == 2
    assert failed["type"] == "import.failed"
    assert failed["data"]["import"]["errors"][0]["line"] == 2


def test_a_release_built_sends_release_built(filled, dave, received):
    release = built_release(filled, dave, version="2.0.0")
    (event,) = (e for e in received() if e["type"] == "release.built")
    assert event["data"]["release"]["version"] == "2.0.0"
    assert event["data"]["release"]["manifest_sha256"] == release.manifest_sha256
    # The archive's sha256 is taken when the release is published, and sent then.
    assert event["data"]["release"]["archive_sha256"] == ""
    assert event["data"]["release"]["archive_size"] == release.archive_size > 0


def test_a_release_published_sends_release_published_with_the_archives_hash(filled, dave, received):
    release = release_publish(release=built_release(filled, dave, version="2.0.0"), user=dave)
    (event,) = (e for e in received() if e["type"] == "release.published")
    assert event["data"]["project"] == filled.slug
    assert event["data"]["release"] == {
        "version": "2.0.0",
        "pair_count": release.pair_count,
        "manifest_sha256": release.manifest_sha256,
        "archive_sha256": release.archive_sha256,
        "archive_size": release.archive_size,
    }
    assert len(release.archive_sha256) == 64


@pytest.mark.usefixtures("celery_eager")
def test_a_finished_filter_run_sends_filter_run_finished(
    project, monkeypatch, django_capture_on_commit_callbacks, received
):
    use_scripted_judges(monkeypatch, {"always-a": canonical("A")})
    PairFactory.create_batch(3, project=project)
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.filter_run_create(project=project, judges=make_judges("always-a"))
    (event,) = (e for e in received() if e["type"] == "filter_run.finished")
    assert event["data"]["filter_run"]["id"] == run.pk
    assert event["data"]["filter_run"]["summary"]["pairs"] == 3
