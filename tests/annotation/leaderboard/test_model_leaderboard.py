"""The model leaderboard from human judgements (docs/leaderboard.md): what each source counts,
the command's JSON contract, the API and its CSV, the Model leaderboard tab, the release card, and
that annotators never see it."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.leaderboard.selectors import model_leaderboard, model_outcomes
from annotation.models import PairStatus, PriorAnnotation
from tests.annotation.agreement.conftest import vote
from tests.annotation.releases.conftest import built_release
from tests.factories import PairFactory, make_response

pytestmark = pytest.mark.django_db

ELO_LN3_HALF = 95.4243  # 400 / ln 10 * ln 3 / 2: three wins to one


def pair(project, n: int, a: str, b: str, *, task: str = "text", **fields):
    return PairFactory(
        project=project,
        external_id=f"lb-{n}",
        task=task,
        response_a=make_response(project, a, f"{a} answers {n}"),
        response_b=make_response(project, b, f"{b} answers {n}"),
        **fields,
    )


def decided(project, n: int, a: str, b: str, label: str, **fields):
    return pair(project, n, a, b, status=PairStatus.CONSENSUS, consensus_label=label, **fields)


@pytest.fixture
def board_project(project, alice, bob):
    """x beats y three times to one by consensus; a same-model pair, a pair without a
    model name, a gold pair and an undecided pair that must not count."""
    for n, label in enumerate("AAAB"):
        decided(project, n, "x", "y", label)
    decided(project, 10, "x", "x", "A")
    decided(project, 11, "", "y", "A")
    decided(project, 12, "y", "x", "A", is_gold=True, gold_label="A")
    pair(project, 13, "y", "x", status=PairStatus.QUEUED)
    return project


def test_consensus_counts_one_comparison_per_decided_pair(board_project):
    board = model_leaderboard(project=board_project, rounds=0)
    assert [row.model for row in board.models] == ["x", "y"]
    # The weak prior (docs/leaderboard.md) pulls four comparisons in by under a point.
    assert board.models[0].score == pytest.approx(1000 + ELO_LN3_HALF, abs=1.0)
    assert (board.models[0].wins, board.models[0].losses) == (3, 1)
    assert board.pairs == 4
    assert board.comparisons == 4
    assert (board.same_model, board.unnamed) == (1, 1)


def test_votes_count_every_human_vote_and_the_prior_annotations(board_project, alice, bob):
    undecided = board_project.pairs.get(external_id="lb-13")  # y vs x
    vote(undecided, alice, 3, seconds=4)  # A: y wins
    vote(undecided, bob, 2, seconds=4)  # tie
    adjudicated = board_project.pairs.get(external_id="lb-0")
    vote(adjudicated, bob, 1, seconds=4, is_adjudication=True)  # not a vote for agreement
    PriorAnnotation.objects.create(pair=undecided, position=0, value=1, label="B")  # x wins
    PriorAnnotation.objects.create(pair=undecided, position=1, value=None, label="")
    outcomes, left_out = model_outcomes(project=board_project, source="votes")
    x, y = outcomes.models.index("x"), outcomes.models.index("y")
    assert outcomes.wins[y, x] == 1
    assert outcomes.wins[x, y] == 1
    assert outcomes.ties[x, y] == 1
    assert left_out["pairs"] == 1


def test_reference_labels_are_the_imported_ones(board_project):
    pair(board_project, 20, "x", "z", prior_label="B")
    pair(board_project, 21, "z", "x", prior_label="tie")
    board = model_leaderboard(project=board_project, source="reference", rounds=0)
    assert [row.model for row in board.models] == ["z", "x"]
    assert board.pairs == 2
    assert (board.models[0].wins, board.models[0].ties) == (1, 1)


def test_a_task_has_a_board_of_its_own(board_project):
    decided(board_project, 30, "y", "z", "A", task="t2i")
    assert [r.model for r in model_leaderboard(project=board_project, task="t2i").models] == [
        "y",
        "z",
    ]
    assert {r.model for r in model_leaderboard(project=board_project).models} == {"x", "y", "z"}


def test_the_command_prints_the_contract_best_first(board_project):
    out = io.StringIO()
    call_command("model_leaderboard", board_project.slug, "--json", "--rounds", "200", stdout=out)
    data = json.loads(out.getvalue())
    assert data["source"] == "consensus"
    assert data["pairs"] == 4
    assert [row["model"] for row in data["models"]] == ["x", "y"]
    first = data["models"][0]
    assert set(first) == {"model", "score", "low", "high", "wins", "losses", "ties", "pairs"}
    assert first["low"] <= first["score"] <= first["high"]
    assert (first["wins"], first["losses"], first["ties"], first["pairs"]) == (3, 1, 0, 4)
    assert data["left_out"] == {"same_model": 1, "unnamed_model": 1}


def test_the_command_names_a_missing_project_and_a_bad_round_count(board_project):
    with pytest.raises(CommandError, match="No project"):
        call_command("model_leaderboard", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--rounds"):
        call_command("model_leaderboard", board_project.slug, "--rounds", "-1")


def test_the_command_prints_a_table(board_project):
    out = io.StringIO()
    call_command("model_leaderboard", board_project.slug, "--rounds", "50", stdout=out)
    lines = out.getvalue().splitlines()
    assert "4 comparisons on 4 pairs" in lines[0]
    assert lines[1].split()[1] == "x"


def test_the_api_serves_staff_and_refuses_annotators_and_outsiders(
    api_for, board_project, alice, carol, dave, eve
):
    url = f"/api/v1/projects/{board_project.slug}/model-leaderboard/"
    for user in (carol, dave):
        answer = api_for(user).get(url, {"rounds": 100})
        assert answer.status_code == 200, answer.content
        assert [row["model"] for row in answer.json()["models"]] == ["x", "y"]
    assert api_for(alice).get(url).status_code == 403
    assert api_for(eve).get(url).status_code == 404
    assert api_for(alice).get(url + "csv/").status_code == 403


def test_the_api_names_a_bad_parameter(api_for, board_project, dave):
    api_client = api_for(dave)
    url = f"/api/v1/projects/{board_project.slug}/model-leaderboard/"
    answer = api_client.get(url, {"source": "judges"})
    assert answer.status_code == 400
    assert "source" in answer.json()
    assert api_client.get(url, {"rounds": 10**9}).status_code == 400


def test_the_csv_has_a_row_per_model_with_formulas_defused(api_for, board_project, dave):
    decided(board_project, 40, "=HYPERLINK(1)", "x", "B")
    api_client = api_for(dave)
    url = f"/api/v1/projects/{board_project.slug}/model-leaderboard/csv/"
    answer = api_client.get(url, {"rounds": 50})
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(answer.content.decode())))
    assert rows[0] == ["rank", "model", "score", "low", "high", "wins", "losses", "ties", "pairs"]
    assert [row[1] for row in rows[1:]] == ["x", "y", "'=HYPERLINK(1)"]


def test_the_model_leaderboard_tab_shows_the_models_to_staff_only(
    client, board_project, alice, carol, dave, eve
):
    """The models have a tab of their own (docs/leaderboard.md, "Where it shows"), not a
    section below the judges: the judge leaderboard only links it."""
    url = f"/p/{board_project.slug}/model-leaderboard/"
    client.force_login(dave)
    page = client.get(f"{url}?source=consensus")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="models"' in html
    assert "chart-model-strength" in html
    assert "chart-model-win-rates" in html
    assert html.index(">x<") < html.index(">y<")
    assert 'aria-current="page">Model leaderboard</a>' in html  # its tab, marked
    judges = client.get(f"/judges/p/{board_project.slug}/leaderboard/").content.decode()
    assert 'id="models"' not in judges
    assert f'href="{url}"' in judges
    # The source and task switches are the API's parameters.
    reference = client.get(f"{url}?source=reference&task=text").content.decode()
    assert 'aria-current="page">Reference labels</a>' in reference
    assert 'aria-current="page">text</a>' in reference
    client.force_login(carol)
    assert client.get(url).status_code == 200
    client.force_login(alice)
    refused = client.get(url)
    assert refused.status_code == 403
    assert ">x<" not in refused.content.decode()
    client.force_login(eve)
    assert client.get(url).status_code == 404


def test_the_release_card_ranks_the_released_models(filled, dave):
    release = built_release(filled, dave)
    models = release.statistics["models"]
    assert {row["model"] for row in models} >= {"model-alpha", "model-beta"}
    scores = [row["score"] for row in models]
    assert scores == sorted(scores, reverse=True)
    assert "## Models" in release.card
    assert "| 1 | " in release.card
