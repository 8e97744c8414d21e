"""The imported reference labels as a judge's third target, and MMRB2's own prediction files
imported and scored as MMRB2's released scorer scores them (docs/judges-evaluation.md)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from annotation.imports.importer import pairs_import
from annotation.models import Pair, PairStatus
from judges.evaluation.judgement_import import judgements_import_text
from judges.models import Judge, JudgeEvaluation, Judgement
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.releases.mmrb2_scorer import mmrb2_accuracy
from tests.factories import JudgeFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/projects/demo/judge-evaluations/"
IMPORT_URL = "/api/v1/projects/demo/judgements/import/"

# Reference labels (MMRB2's "chosen") of six pairs in two tasks, imported without votes.
CHOSEN = {"t-0": "A", "t-1": "B", "t-2": "A", "r-0": "B", "r-1": "A", "r-2": "B"}
# An MMRB2 prediction file: "reverse" names the responses as shown (B first), so its "A" is
# canonical B. t-2 has no reverse answer (an empty list), r-1 a null judgement, r-2 is absent.
PREDICTIONS = {
    "t-0": {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "B"}]},  # right, right
    "t-1": {"forward": [{"judgement": "tie"}], "reverse": [{"judgement": "A"}]},  # wrong, right
    "t-2": {"forward": [{"judgement": "A"}], "reverse": []},  # right, missing
    "r-0": {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "B"}]},  # wrong, wrong
    "r-1": {"forward": [{"judgement": None}], "reverse": [{"judgement": "B"}]},  # missing, right
}


@pytest.fixture
def reference_project(project, tmp_path):
    pairs = [
        text_pair(pair_id, task="t2i" if pair_id.startswith("t") else "reasoning", chosen=label)
        for pair_id, label in CHOSEN.items()
    ]
    pairs_import(project=project, source=write_jsonl(tmp_path / "labelled.jsonl", pairs))
    # Arbiter's own consensus disagrees on one pair: the reference target must not read it.
    Pair.objects.filter(project=project, external_id="t-0").update(
        status=PairStatus.CONSENSUS, consensus_label="B"
    )
    return project


def offline() -> Judge:
    return JudgeFactory(name="offline", kind="scores")


def scorer_answers(predictions: dict) -> dict:
    """The predictions as tests/annotation/releases/mmrb2_scorer.py takes them."""
    return {
        pair_id: {
            order: (answers[0].get("judgement") if answers else None)
            for order, answers in prediction.items()
        }
        for pair_id, prediction in predictions.items()
    }


def test_a_labelled_file_without_votes_is_a_target_scored_as_mmrb2_scores_it(
    reference_project, tmp_path, capsys
):
    offline()
    path = tmp_path / "task_predictions.json"
    path.write_text(json.dumps(PREDICTIONS))
    call_command(
        "evaluate_judge", "offline", "--reference", "demo", "--import", str(path),
        "--no-calls", "--json",
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "demo:reference"
    assert out["pairs"] == 6  # every pair with a reference label, none with votes
    results = out["results"]
    # By hand: t2i answers given 5 (t-2 reverse missing), right 4 (t-1's tie is wrong);
    # reasoning answers given 3 (r-1 forward null, r-2 absent), right 1; overall 5 of 8.
    assert results["by_task"]["t2i"]["dual_accuracy"]["value"] == pytest.approx(4 / 5)
    assert results["by_task"]["reasoning"]["dual_accuracy"]["value"] == pytest.approx(1 / 3)
    assert results["overall"]["dual_accuracy"]["value"] == pytest.approx(5 / 8)
    # The strict figure counts the four missing orders of the 12 as wrong.
    assert results["overall"]["dual_accuracy_strict"]["value"] == pytest.approx(5 / 12)
    assert results["overall"]["dual_accuracy"]["answered"] == pytest.approx(8 / 12)
    # MMRB2's definition, one file per task as MMRB2 releases them.
    for task, prefix in (("t2i", "t-"), ("reasoning", "r-")):
        benchmark = tmp_path / f"{task}.json"
        rows = [{"id": i, "chosen": c} for i, c in CHOSEN.items() if i.startswith(prefix)]
        benchmark.write_text(json.dumps({"pairs": rows}))
        expected = mmrb2_accuracy(benchmark, scorer_answers(PREDICTIONS))
        assert results["by_task"][task]["dual_accuracy"]["value"] == pytest.approx(expected)
    # Omni-RB on the forward answers: A/B pairs 6, right t-0 and t-2 only.
    assert results["overall"]["accuracy_without_ties"]["value"] == pytest.approx(2 / 6)


def test_mmrb2_predictions_are_stored_in_canonical_terms(reference_project):
    judge = offline()
    imported = judgements_import_text(
        judge=judge, project=reference_project, text=json.dumps(PREDICTIONS)
    )
    assert imported == 9  # t-2's empty reverse list is no answer at all
    stored = {
        (pair, order): (side, outcome)
        for pair, order, side, outcome in Judgement.objects.values_list(
            "pair__external_id", "order", "side", "outcome"
        )
    }
    assert stored[("t-0", "BA")] == ("A", "ok")  # "B" shown first, flipped back
    assert stored[("t-1", "AB")] == ("tie", "ok")
    assert stored[("r-1", "AB")] == ("", "abstain")
    assert ("t-2", "BA") not in stored


def test_a_bad_mmrb2_prediction_file_names_the_pair_and_imports_nothing(reference_project):
    judge = offline()
    bad = {
        "t-0": {"forward": [{"judgement": "C"}]},
        "nope": {"forward": [{"judgement": "A"}]},
        "t-1": {"sideways": []},
    }
    with pytest.raises(ValidationError) as refused:
        judgements_import_text(judge=judge, project=reference_project, text=json.dumps(bad))
    assert refused.value.messages == [
        "pair t-0: forward[0].judgement: 'C' is not A, B or tie",
        "pair t-1: sideways: unknown field (forward, reverse)",
        "pair nope: no pair 'nope' in project demo",
    ]
    assert not Judgement.objects.exists()


def test_the_api_and_the_leaderboard_take_the_reference_target(
    reference_project, carol, api_for, client_for
):
    offline()
    api = api_for(carol)
    body = SimpleUploadedFile("preds.json", json.dumps(PREDICTIONS).encode())
    answer = api.post(IMPORT_URL, {"judge": "offline", "file": body}, format="multipart")
    assert answer.status_code == 201, answer.content
    assert answer.json() == {"imported": 9}
    started = api.post(
        URL, {"judge": "offline", "release": "reference", "call": False}, format="json"
    )
    assert started.status_code == 202, started.content
    assert started.json()["target"] == "demo:reference"
    assert started.json()["results"]["overall"]["dual_accuracy"]["value"] == pytest.approx(5 / 8)
    board = api.get(URL, {"release": "reference"}).json()
    assert [row["judge"] for row in board] == ["offline"]
    assert api.get(URL).json() == []  # the consensus board is another target
    page = client_for(carol).get("/judges/p/demo/leaderboard/?release=reference")
    assert page.status_code == 200
    html = page.content.decode()
    assert "demo:reference" in html
    assert "answered 0.667" in html  # the share answered beside the accuracy
    assert JudgeEvaluation.objects.get().release == JudgeEvaluation.REFERENCE
