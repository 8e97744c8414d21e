"""The client against a live gunicorn: lists read page by page, a datasets.Dataset imported,
the API's refusals raised with their fields, 429s retried after Retry-After, a release's
files checked against their hashes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from arbiter_client import (
    BadRequest,
    Client,
    Conflict,
    Forbidden,
    IntegrityError,
    NotFound,
    Throttled,
    Unauthorized,
)
from datasets import Dataset

from annotation.models import Pair, PairStatus
from tests.client.conftest import text_pairs, token_for, write_pairs
from tests.factories import PairFactory
from tests.live_gunicorn import ROOT


def test_lists_are_read_page_by_page_and_a_dataset_imports(
    live_server_for, project, carol, tmp_path
):
    server = live_server_for()
    seen: list[str] = []
    http = httpx.Client(event_hooks={"request": [lambda request: seen.append(str(request.url))]})
    with Client(server.url, token_for(carol), http=http) as curator:
        job = curator.import_dataset(project.slug, Dataset.from_list(text_pairs(7)), progress=False)
        assert job["status"] == "succeeded"
        assert job["created_pairs"] == 7
        seen.clear()
        ids = [pair["id"] for pair in curator.pairs(project.slug, page_size=3)]
        assert sorted(ids) == sorted(f"p-{i}" for i in range(7))
        assert len(seen) == 3  # three pages of at most three
        assert [p["slug"] for p in curator.projects()] == [project.slug]
        assert [j["id"] for j in curator.imports(project.slug)] == [job["id"]]
    assert Pair.objects.filter(project=project).count() == 7


def test_refusals_carry_the_apis_field_and_message(
    live_server_for, project, carol, alice, eve, tmp_path
):
    server = live_server_for()
    bad = write_pairs(tmp_path / "bad.jsonl", [{"id": "x", "prompt_content": "no responses"}])
    with Client(server.url, token_for(carol)) as curator, pytest.raises(BadRequest) as refused:
        curator.import_file(project.slug, bad, progress=False)
    assert refused.value.status == 400
    assert any(where.startswith("line 1") for where in refused.value.fields), refused.value.fields
    assert "response_a" in str(refused.value)
    assert refused.value.body["detail"] == "Nothing was imported."
    with pytest.raises(NotFound):
        Client(server.url, token_for(eve)).project(project.slug)  # the outsider
    with pytest.raises(Forbidden):
        list(Client(server.url, token_for(alice)).pairs(project.slug))  # an annotator
    with pytest.raises(Unauthorized):
        Client(server.url, "0" * 40).project(project.slug)
    assert Pair.objects.filter(project=project).count() == 0
    # A flag: another one on the same pair refused (409) while it is open; the curator's reply
    # read back by its author.
    PairFactory(project=project, status=PairStatus.QUEUED)
    with (
        Client(server.url, token_for(alice)) as annotator,
        Client(server.url, token_for(carol)) as curator,
    ):
        assignment = annotator.claim(project.slug)
        assert annotator.flag(assignment["id"], kind="identical", note="same")["skipped"] is False
        with pytest.raises(Conflict) as conflict:
            annotator.flag(assignment["id"], kind="broken_media")
        assert "already" in conflict.value.detail
        [listed] = curator.flags(project.slug)
        assert (listed["annotator"], listed["note"]) == ("alice", "same")
        curator.reply_to_flag(project.slug, listed["id"], "Fixed upstream.", resolve=True)
        assert curator.flags(project.slug) == []
        [mine] = annotator.my_flags(project.slug)
        assert [reply["text"] for reply in mine["replies"]] == ["Fixed upstream."]
        # The curator's reply and resolution in the audit log, read page by page and filtered;
        # an annotator may not read it, and a bad date is refused naming the field.
        logged = list(curator.audit(project.slug, actor="carol", page_size=1))
        assert [event["action"] for event in logged] == ["flag.resolved", "flag.replied"]
        assert logged[1]["after"]["reply"] == "Fixed upstream."
        today = logged[0]["created_at"][:10]
        [resolved] = curator.audit(project.slug, action="flag.resolved", since=today, until=today)
        assert (resolved["target_type"], resolved["after"]) == ("flag", {"resolved": True})
        assert list(curator.audit(project.slug, actor="alice")) == []
        with pytest.raises(Forbidden):
            list(annotator.audit(project.slug))
        with pytest.raises(BadRequest) as bad_date:
            list(curator.audit(project.slug, since="yesterday"))
        assert "since" in bad_date.value.fields
        # The flagged pair excluded with a reason, the annotator's claim then empty, and the
        # pair included again; an empty reason refused naming the field.
        external_id = Pair.objects.get(project=project).external_id
        with pytest.raises(BadRequest) as no_reason:
            curator.exclude_pair(project.slug, external_id, reason="")
        assert "reason" in no_reason.value.fields
        why = "both answers are identical"
        out = curator.exclude_pair(project.slug, external_id, reason=why)
        assert (out["status"], out["exclusion_reason"]) == ("excluded", why)
        assert annotator.claim(project.slug) is None
        assert curator.include_pair(project.slug, external_id)["status"] == "annotating"


def test_429_is_retried_after_retry_after_and_raised_once_retries_run_out(
    live_server_for, project, carol
):
    server = live_server_for(ARBITER_API_THROTTLE_RATE="2/s")
    statuses: list[int] = []
    waits: list[float] = []
    http = httpx.Client(
        event_hooks={"response": [lambda response: statuses.append(response.status_code)]}
    )

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    patient = Client(server.url, token_for(carol), http=http, sleep=sleep)
    for _ in range(5):
        assert patient.project(project.slug)["slug"] == project.slug
    assert 429 in statuses
    assert waits
    assert all(0 < wait <= 2 for wait in waits)  # the server's Retry-After
    impatient = Client(server.url, token_for(carol), retries=0)

    def flood() -> None:
        for _ in range(5):
            impatient.project(project.slug)

    with pytest.raises(Throttled) as refused:
        flood()
    assert "throttled" in str(refused.value.detail).lower()


def test_a_published_release_downloads_with_its_hashes_checked(
    live_server_for, project, carol, annotator_tokens, tmp_path, settings
):
    server = live_server_for()
    curator = Client(server.url, token_for(carol))
    curator.import_file(
        project.slug, write_pairs(tmp_path / "p.jsonl", text_pairs(3)), progress=False
    )
    Pair.objects.filter(project=project).update(status="queued")
    for token in annotator_tokens:
        assert Client(server.url, token).annotate(project.slug, lambda a: {"choice": "left"}) == 3
    annotator = Client(server.url, annotator_tokens[0])
    mine = list(annotator.my_votes(project.slug))
    assert [vote["choice"] for vote in mine] == ["left"] * 3
    assert annotator.my_speed(project.slug)["timed_votes"] == 3
    built = curator.create_release(project.slug, "1.0.0", progress=False)
    assert built["status"] == "built"
    curator.publish_release(project.slug, "1.0.0")
    folder = curator.download_release(project.slug, "1.0.0", tmp_path / "r")
    files = {entry["name"]: entry for entry in curator.release_files(project.slug, "1.0.0")}
    assert {
        path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()
    } == set(files)
    # a file changed on the server after publishing is caught by its sha256
    served = next(Path(settings.ARBITER_RELEASE_ROOT).rglob("README.md"))
    served.write_text(served.read_text().replace("a", "b"))
    with pytest.raises(IntegrityError, match=r"README\.md: sha256"):
        curator.download_release(project.slug, "1.0.0", tmp_path / "again")


def test_mmrb2_and_omni_rewardbench_files_import_as_they_are(
    live_server_for, project, carol, tmp_path
):
    """MMRB2's t2i.json with its images folder (zipped by the client) and an
    Omni-RewardBench task file, into a likert6 project."""
    project.scale = "likert6"
    project.save(update_fields=["scale"])
    server = live_server_for()
    sample = ROOT / "fixtures" / "mmrb2_sample"
    omni = tmp_path / "text_to_text_preferences.json"
    omni.write_text(
        json.dumps(
            [
                {
                    "id": 12,
                    "prompt": "Say hello.",
                    "response1": "Hello!",
                    "response2": "Bye.",
                    "model1": "m1",
                    "model2": "m2",
                    "criteria": "politeness",
                    "criteria_preference": "response1",
                }
            ]
        )
    )
    with Client(server.url, token_for(carol)) as curator:
        mmrb2 = curator.import_file(project.slug, sample / "t2i.json", media=sample, progress=False)
        job = curator.import_file(project.slug, omni, progress=False)
        assert curator.pair(project.slug, "t2t/12")["prior_label"] == "A"
    expected = len(json.loads((sample / "t2i.json").read_text())["pairs"])
    assert mmrb2["created_pairs"] == expected
    assert mmrb2["created_media"] > 0  # its images, read from the zipped folder
    assert job["created_pairs"] == 1
