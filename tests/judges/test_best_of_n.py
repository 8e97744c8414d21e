"""Best-of-N (docs/judges-evaluation.md, "Best-of-N"): by scores and by knockout, every
comparison in both orders, against the loopback OpenAI-compatible server; input errors by
line and field; the command and the API with its permissions."""

from __future__ import annotations

import json
import re

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from annotation.models import ProjectMedia
from judges.best_of_n.services import best_of_n, parse_jsonl
from tests.factories import JudgeFactory
from tests.judges.backend_helpers import noisy_image, store_image
from tests.judges.fake_openai import FakeOpenAI, malformed, status, verdict

pytestmark = pytest.mark.django_db

QUALITY = re.compile(r"quality (\d+)")


def by_quality(request):
    """Prefers the response of higher quality, more confidently the larger the gap."""
    first, second = (int(QUALITY.search(request.response_text(n)).group(1)) for n in (1, 2))
    gap = abs(first - second)
    return verdict("1" if first >= second else "2", confidence=0.5 + gap / 20)


@pytest.fixture
def quality_server():
    with FakeOpenAI(by_quality) as fake:
        yield fake


@pytest.fixture
def quality_judge(quality_server):
    return JudgeFactory(name="quality", kind="openai", base_url=quality_server.base_url, model="m")


def line(item_id: str, qualities: list[int]) -> str:
    return json.dumps(
        {
            "id": item_id,
            "prompt": f"Write something for {item_id}",
            "candidates": [
                {"id": f"c{index}", "content": f"candidate of quality {q}"}
                for index, q in enumerate(qualities)
            ],
        }
    )


def test_knockout_finds_the_best_in_2_n_minus_1_calls(quality_judge, quality_server):
    items = parse_jsonl([line("p1", [3, 1, 9, 4, 2]), line("p2", [5, 6])])
    outcome = best_of_n(judge=quality_judge, items=items, method="knockout")
    assert [r["best"] for r in outcome["results"]] == ["c2", "c1"]
    assert quality_server.request_count == 2 * 4 + 2 * 1
    first_round = outcome["results"][0]["rounds"][0]
    assert first_round[0] == {
        "first": "c0",
        "second": "c1",
        "answers": {"AB": "A", "BA": "A"},
        "winner": "c0",
    }
    assert [len(r) for r in outcome["results"][0]["rounds"]] == [2, 1, 1]  # c4 had a bye


def test_scores_rank_by_mean_win_probability_in_n_times_n_minus_1_calls(
    quality_judge, quality_server
):
    items = parse_jsonl([line("p1", [2, 8, 5])])
    outcome = best_of_n(judge=quality_judge, items=items, method="scores")
    result = outcome["results"][0]
    assert result["best"] == "c1"
    assert quality_server.request_count == 3 * 2
    # c1 beats c0 (gap 6, 0.8) and c2 (gap 3, 0.65) in both orders: (0.8 * 2 + 0.65 * 2) / 4.
    assert result["scores"]["c1"] == pytest.approx((0.8 + 0.8 + 0.65 + 0.65) / 4)
    assert result["scores"]["c0"] < result["scores"]["c2"] < result["scores"]["c1"]


def test_a_judge_that_always_picks_the_first_shown_keeps_the_input_order():
    with FakeOpenAI(verdict("1")) as server:
        judge = JudgeFactory(name="first", kind="openai", base_url=server.base_url, model="m")
        items = parse_jsonl([line("p1", [1, 9, 5])])
        for method in ("knockout", "scores"):
            assert best_of_n(judge=judge, items=items, method=method)["results"][0]["best"] == "c0"


def test_no_valid_vote_names_no_winner_and_why():
    """A judge that never votes (here every call refused) picks no candidate: "best" is None,
    never the first in input order, and "no_winner" says what the judge gave instead."""
    with FakeOpenAI(status(400, body="model not found")) as server:
        judge = JudgeFactory(name="broken", kind="openai", base_url=server.base_url, model="m")
        items = parse_jsonl([line("p1", [1, 9, 5])])
        for method in ("knockout", "scores"):
            result = best_of_n(judge=judge, items=items, method=method)["results"][0]
            assert result["best"] is None, method
            assert result["no_winner"].startswith("No winner: the judge gave no valid vote on ")
            assert "an error (HTTP 400: model not found)" in result["no_winner"]
        scores = best_of_n(judge=judge, items=items, method="scores")["results"][0]
        assert scores["scores"] == {"c0": None, "c1": None, "c2": None}
        assert "any of its 3 comparisons" in scores["no_winner"]
        assert "6 times" in scores["no_winner"]
        knockout = best_of_n(judge=judge, items=items, method="knockout")["results"][0]
        assert "round 1's match c0 vs c1" in knockout["no_winner"]
        # The bracket stops at the match it cannot decide: no second round is played.
        assert knockout["rounds"] == [
            [
                {
                    "first": "c0",
                    "second": "c1",
                    "answers": {"AB": "error", "BA": "error"},
                    "winner": None,
                }
            ]
        ]


def test_a_knockout_match_without_a_vote_ends_only_its_prompt():
    """Unreadable answers on one prompt leave that prompt without a winner; the others are
    decided as before."""

    def unsure(request):
        return malformed() if "unsure" in request.text else verdict("1")

    with FakeOpenAI(unsure) as server:
        judge = JudgeFactory(name="shy", kind="openai", base_url=server.base_url, model="m")
        items = parse_jsonl(
            [
                json.dumps(
                    {
                        "id": "p1",
                        "prompt": "unsure",
                        "candidates": [{"id": "a", "content": "x"}, {"id": "b", "content": "y"}],
                    }
                ),
                line("p2", [5, 6]),
            ]
        )
        results = best_of_n(judge=judge, items=items, method="knockout")["results"]
    assert [(r["best"], r["no_winner"] is None) for r in results] == [(None, False), ("c0", True)]
    assert "an answer that could not be read twice" in results[0]["no_winner"]


def test_bad_input_is_refused_by_line_and_field():
    lines = [
        "{nope",
    ]
    with pytest.raises(ValidationError, match="line 1: not valid JSON"):
        parse_jsonl(lines)
    lines = [
        json.dumps({"id": "p1", "prompt": "x", "candidates": [{"id": "a", "content": "y"}]}),
        json.dumps(
            {
                "id": "p2",
                "prompt": [["image", "ab" * 32]],
                "candidates": [{"id": "a", "content": "y"}, {"id": "a", "content": [["video", 1]]}],
            }
        ),
    ]
    with pytest.raises(ValidationError) as error:
        parse_jsonl(lines)
    assert error.value.messages == [
        "line 1: candidates: a list of at least 2",
        "line 2: candidates[1].id: 'a' is given twice",
        'line 2: candidates[1].content[0]: must be ["text", "..."] or [kind, "<sha256>"] with '
        "kind one of image, video, audio, model3d",
        f"image {'ab' * 8}...: not in the media store",
    ]


def test_the_command_prints_one_json_line_per_prompt(quality_judge, tmp_path, capsys):
    path = tmp_path / "candidates.jsonl"
    path.write_text(line("p1", [1, 7, 3, 2]) + "\n")
    call_command("best_of_n", "quality", str(path), "--method", "knockout")
    out = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert [(r["id"], r["best"]) for r in out] == [("p1", "c1")]


def test_the_api_for_curators_and_researchers_with_a_call_limit(
    project, quality_judge, dave, alice, eve, api_for, settings, monkeypatch
):
    url = f"/api/v1/projects/{project.slug}/best-of-n/"
    body = {"judge": "quality", "method": "scores", "items": [json.loads(line("p1", [4, 6]))]}
    answer = api_for(dave).post(url, body, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["results"][0]["best"] == "c1"
    assert answer.json()["results"][0]["no_winner"] is None
    assert api_for(alice).post(url, body, format="json").status_code == 403
    assert api_for(eve).post(url, body, format="json").status_code == 404
    monkeypatch.setattr("judges.best_of_n.api.MAX_API_CALLS", 1)
    refused = api_for(dave).post(url, body, format="json")
    assert refused.status_code == 400
    assert refused.json()["items"] == "2 judge calls by scores; a request may make 1."
    monkeypatch.undo()
    bad = api_for(dave).post(url, {**body, "items": [{"id": "p"}]}, format="json")
    assert bad.status_code == 400
    assert "items[0]: candidates: a list of at least 2" in bad.json()["detail"]
    # An image stored for another project is not reachable by its hash.
    elsewhere = store_image(noisy_image(8, 8))
    item = json.loads(line("p1", [4, 6]))
    item["prompt"] = [["text", "Describe"], ["image", elsewhere.sha256]]
    hidden = api_for(dave).post(url, {**body, "items": [item]}, format="json")
    assert hidden.status_code == 400
    assert "not in the media of project demo" in hidden.json()["detail"]
    ProjectMedia.objects.create(project=project, media=elsewhere)  # now one of its images
    shown = api_for(dave).post(url, {**body, "items": [item]}, format="json")
    assert shown.status_code == 200, shown.content
