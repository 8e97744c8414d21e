"""The best-of-N page (docs/judges-evaluation.md, "Best-of-N"): upload a candidates file as the
command line reads it, pick a judge and a method, see the bracket or the scores and download
them; with the built-in heuristic judge, which prefers the candidate that does not refuse."""

from __future__ import annotations

import csv
import io
import json
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotation.models import ProjectMedia
from judges.best_of_n.services import MAX_API_CALLS
from judges.models import BestOfNRun
from tests.factories import JudgeFactory
from tests.judges.backend_helpers import noisy_image, store_image

pytestmark = pytest.mark.django_db

REFUSAL = "I'm sorry, but I can't help with that."
GOOD = "Here is a short poem about the sea, with waves and gulls."


@pytest.fixture
def heuristic(db):
    return JudgeFactory(name="heuristic")


def page(project) -> str:
    return reverse("judges:best-of-n", args=[project.slug])


def candidates_file(*lines: dict, name: str = "candidates.jsonl") -> SimpleUploadedFile:
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    return SimpleUploadedFile(name, text.encode(), content_type="application/jsonl")


def prompt(item_id: str, *contents) -> dict:
    return {
        "id": item_id,
        "prompt": f"Write a poem ({item_id})",
        "candidates": [{"id": f"c{i}", "content": c} for i, c in enumerate(contents)],
    }


def run(client, project, judge, method: str, *lines: dict):
    data = {"judge": judge.name, "method": method, "candidates": candidates_file(*lines)}
    return client.post(page(project), data)


def test_knockout_shows_the_bracket_and_downloads_it(client_for, carol, project, heuristic):
    client = client_for(carol)
    assert client.get(page(project)).status_code == 200
    response = run(client, project, heuristic, "knockout", prompt("p1", REFUSAL, GOOD, REFUSAL))
    assert response.status_code == 302
    saved = BestOfNRun.objects.get()
    assert response["Location"] == reverse("judges:best-of-n-run", args=[project.slug, saved.pk])
    assert (saved.judge, saved.method, saved.prompts, saved.created_by) == (
        heuristic,
        "knockout",
        1,
        carol,
    )
    # c0 against c1, c2 the odd one out; then c1 against c2: 2(N-1) = 4 calls.
    result = saved.outcome["results"][0]
    assert result["best"] == "c1"
    assert saved.outcome["calls"] == 4
    assert [[m["winner"] for m in r] for r in result["rounds"]] == [["c1"], ["c1"]]
    body = client.get(response["Location"]).content.decode()
    assert 'best is <span class="best">c1</span>' in body
    assert "Round 1" in body
    assert "Round 2" in body
    assert "<td>c0 vs c1</td><td>c1</td><td>c1</td>" in body
    assert "<td>c1 vs c2</td><td>c1</td><td>c1</td>" in body
    download = reverse("judges:best-of-n-download", args=[project.slug, saved.pk, "json"])
    as_json = client.get(download)
    assert as_json["Content-Disposition"].startswith("attachment")
    assert as_json.json() == saved.outcome
    as_csv = client.get(download.replace("/json/", "/csv/"))
    rows = list(csv.DictReader(io.StringIO(as_csv.content.decode())))
    assert [(r["round"], r["first"], r["second"], r["winner"]) for r in rows] == [
        ("1", "c0", "c1", "c1"),
        ("2", "c1", "c2", "c1"),
    ]
    assert rows[0]["answer_AB"] == "B"
    assert rows[0]["answer_BA"] == "B"
    assert f"Run {saved.pk}" in client.get(page(project)).content.decode()


def test_scores_rank_every_candidate(client_for, dave, project, heuristic):
    client = client_for(dave)
    response = run(client, project, heuristic, "scores", prompt("p1", REFUSAL, GOOD))
    assert response.status_code == 302
    saved = BestOfNRun.objects.get()
    assert saved.outcome["results"][0]["scores"] == pytest.approx({"c0": 0.05, "c1": 0.95})
    body = client.get(response["Location"]).content.decode()
    assert body.index("<td>c1</td>") < body.index("<td>c0</td>"), "best first"
    assert "0.950" in body
    assert "0.050" in body
    download = reverse("judges:best-of-n-download", args=[project.slug, saved.pk, "csv"])
    rows = list(csv.DictReader(io.StringIO(client.get(download).content.decode())))
    assert {(r["candidate_id"], r["best"]) for r in rows} == {("c0", "False"), ("c1", "True")}


def test_a_prompt_without_a_valid_vote_shows_no_winner_and_why(
    client_for, carol, project, heuristic
):
    """The heuristic judge abstains when neither candidate is broken: no vote, so no winner
    (never "best is c0"), on the page, in the message and in both downloads."""
    client = client_for(carol)
    other = "A calm poem about the hills, with sheep and a stone wall."
    for method in ("knockout", "scores"):
        response = run(client, project, heuristic, method, prompt("p1", GOOD, other, GOOD))
        assert response.status_code == 302
        saved = BestOfNRun.objects.get(method=method)
        result = saved.outcome["results"][0]
        assert result["best"] is None
        assert result["no_winner"].startswith("No winner: the judge gave no valid vote on ")
        assert "only an abstention" in result["no_winner"]
        shown = client.get(response["Location"])
        body = unescape(shown.content.decode())
        assert "best is" not in body
        assert 'class="badge">best' not in body
        assert "Prompt p1: no winner" in body
        assert result["no_winner"] in body
        assert "1 of 1 prompts have no winner" in body
        download = reverse("judges:best-of-n-download", args=[project.slug, saved.pk, "json"])
        assert client.get(download).json()["results"][0]["best"] is None
        as_csv = client.get(download.replace("/json/", "/csv/")).content.decode()
        rows = list(csv.DictReader(io.StringIO(as_csv)))
        assert rows
        assert {r["no_winner"] for r in rows} == {result["no_winner"]}
        if method == "scores":
            assert {r["best"] for r in rows} == {"False"}
        else:  # the first match had no vote: the bracket ends there
            assert [(r["first"], r["second"], r["winner"]) for r in rows] == [("c0", "c1", "")]
            assert "none: no valid vote" in body


def test_a_bad_file_is_refused_line_by_line(client_for, carol, project, heuristic):
    client = client_for(carol)
    bad = SimpleUploadedFile("c.jsonl", b'{"id": "p1", "candidates": []}\nnot json\n')
    response = client.post(
        page(project), {"judge": heuristic.name, "method": "knockout", "candidates": bad}
    )
    assert response.status_code == 400
    errors = response.context["form"].errors["candidates"]
    assert any("line 2: not valid JSON" in error for error in errors)
    latin = SimpleUploadedFile("c.jsonl", "é".encode("latin-1"))
    response = client.post(
        page(project), {"judge": heuristic.name, "method": "knockout", "candidates": latin}
    )
    assert "not UTF-8" in response.context["form"].errors["candidates"][0]
    assert not BestOfNRun.objects.exists()


def test_images_must_be_the_projects_own(client_for, carol, project, heuristic):
    media = store_image(noisy_image(32, 32))
    line = prompt("p1", [["image", media.sha256]], GOOD)
    line["task"] = "t2i"
    response = run(client_for(carol), project, heuristic, "knockout", line)
    assert response.status_code == 400
    assert "not in the media of project demo" in str(response.context["form"].errors)
    ProjectMedia.objects.create(project=project, media=media)
    assert run(client_for(carol), project, heuristic, "knockout", line).status_code == 302


def test_too_many_calls_are_refused_before_any_is_made(client_for, carol, project, heuristic):
    n = int(MAX_API_CALLS**0.5) + 2  # N(N-1) calls by scores
    big = prompt("p1", *[f"{GOOD} {i}" for i in range(n)])
    response = run(client_for(carol), project, heuristic, "scores", big)
    assert response.status_code == 400
    assert f"a run may make {MAX_API_CALLS}" in str(response.context["form"].errors)
    assert not BestOfNRun.objects.exists()


def test_only_the_projects_enabled_judges_are_offered(
    client_for, carol, project, other_project, heuristic
):
    elsewhere = JudgeFactory(name="elsewhere")
    elsewhere.projects.set([other_project])
    off = JudgeFactory(name="off", kind="heuristic", enabled=False)
    client = client_for(carol)
    body = client.get(page(project)).content.decode()
    assert 'value="heuristic"' in body
    assert 'value="elsewhere"' not in body
    assert 'value="off"' not in body
    for judge in (elsewhere, off):
        response = run(client, project, judge, "knockout", prompt("p1", REFUSAL, GOOD))
        assert response.status_code == 400
        assert "judge" in response.context["form"].errors
    assert not BestOfNRun.objects.exists()


def test_outsiders_get_404_and_annotators_403(
    client_for, alice, eve, carol, project, other_project, heuristic
):
    run(client_for(carol), project, heuristic, "knockout", prompt("p1", REFUSAL, GOOD))
    saved = BestOfNRun.objects.get()
    urls = [
        page(project),
        reverse("judges:best-of-n-run", args=[project.slug, saved.pk]),
        reverse("judges:best-of-n-download", args=[project.slug, saved.pk, "json"]),
    ]
    for user, status in ((alice, 403), (eve, 404)):
        client = client_for(user)
        for url in urls:
            assert client.get(url).status_code == status, (user, url)
        response = run(client, project, heuristic, "knockout", prompt("p1", REFUSAL, GOOD))
        assert response.status_code == status
    # Another project's run is not found under this one.
    other_url = reverse("judges:best-of-n-run", args=[other_project.slug, saved.pk])
    from tests.factories import MembershipFactory

    MembershipFactory(project=other_project, user=carol, role="curator")
    assert client_for(carol).get(other_url).status_code == 404
    assert BestOfNRun.objects.count() == 1


def test_the_page_needs_csrf(carol, project, heuristic):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    data = {
        "judge": heuristic.name,
        "method": "knockout",
        "candidates": candidates_file(prompt("p1", REFUSAL, GOOD)),
    }
    assert client.post(page(project), data).status_code == 403
    assert not BestOfNRun.objects.exists()


def test_candidate_ids_are_escaped(client_for, carol, project, heuristic):
    line = {
        "id": "<b>p</b>",
        "prompt": "x",
        "candidates": [
            {"id": "<script>x</script>", "content": GOOD},
            {"id": "c1", "content": REFUSAL},
        ],
    }
    response = run(client_for(carol), project, heuristic, "scores", line)
    body = client_for(carol).get(response["Location"]).content.decode()
    assert "<script>x</script>" not in body
    assert "&lt;script&gt;x&lt;/script&gt;" in body


def test_input_a_json_column_cannot_hold_or_deep_nesting_is_refused(
    client_for, carol, project, heuristic
):
    client = client_for(carol)
    # The shared JSON reader (annotation/core/json_input.py) names what the line holds.
    for bad_id, why in (("a\x00b", "NUL"), ("\ud800", "surrogate")):
        line = prompt("p1", REFUSAL, GOOD)
        line["candidates"][0]["id"] = bad_id
        response = run(client, project, heuristic, "knockout", line)
        assert response.status_code == 400, repr(bad_id)
        errors = str(response.context["form"].errors)
        assert "line 1:" in errors, errors
        assert why in errors, errors
    deep = SimpleUploadedFile("c.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n")
    data = {"judge": heuristic.name, "method": "knockout", "candidates": deep}
    response = client.post(page(project), data)
    assert response.status_code == 400
    assert "line 1: JSON nested deeper than" in str(response.context["form"].errors)
    assert not BestOfNRun.objects.exists()
