"""Omni-RewardBench's task files in one project, judged by imported judgements: the ids the
files share resolve to each task's own pair (``<task>/<id>``, docs/import-format.md,
"Omni-RewardBench"), and each task is scored on the answer in the order its released script
shows the pair (docs/judges-evaluation.md, "What is scored")."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from annotation.imports.importer import pairs_import
from annotation.models import Pair
from judges.evaluation.judgement_import import judgements_import_text
from judges.models import Judgement
from tests.annotation.media.conftest import audio_write
from tests.factories import JudgeFactory

pytestmark = pytest.mark.django_db


def _record(number: int, preference: str, **fields) -> dict:
    return {
        "id": number,  # integer ids, 1 and 2 in both files
        "prompt": f"Prompt {number}",
        "model1": "m1",
        "model2": "m2",
        "criteria": "Faithful to the prompt",
        "criteria_preference": preference,
        **fields,
    }


@pytest.fixture
def omni_project(project, tmp_path):
    audio_write(tmp_path / "a1.wav")
    audio_write(tmp_path / "a2.wav", seconds=0.3)
    files = {
        "text_to_text": [
            _record(1, "response1", response1="One", response2="Two"),
            _record(2, "response2", response1="Three", response2="Four"),
        ],
        "text_to_audio": [
            _record(1, "response2", response1_path="a1.wav", response2_path="a2.wav"),
            _record(2, "tie", response1_path="a2.wav", response2_path="a1.wav"),
        ],
    }
    for stem, records in files.items():
        path = tmp_path / f"{stem}_preferences.json"
        path.write_text(json.dumps(records))
        pairs_import(project=project, source=path, media_root=tmp_path)
    return project


# A judge that always prefers the response shown first, in canonical terms: A when A is shown
# first (AB), B when B is (BA).
FIRST_SHOWN = [
    {"pair": f"{task}/{number}", "order": order, "verdict": "A" if order == "AB" else "B"}
    for task in ("t2t", "t2a")
    for number in (1, 2)
    for order in ("AB", "BA")
]


def test_judgements_resolve_to_each_tasks_pair_and_t2a_is_scored_b_first(omni_project, capsys):
    judge = JudgeFactory(name="offline", kind="scores")
    text = "\n".join(json.dumps(line) for line in FIRST_SHOWN)
    assert judgements_import_text(judge=judge, project=omni_project, text=text) == 8
    stored = {
        (j.pair.external_id, j.pair.task, j.order): j.side
        for j in Judgement.objects.select_related("pair")
    }
    assert stored[("t2a/1", "t2a", "BA")] == "B"
    assert stored[("t2t/1", "t2t", "AB")] == "A"
    assert {pair.task for pair in Pair.objects.filter(judgements__isnull=False)} == {"t2t", "t2a"}
    call_command(
        "evaluate_judge", "offline", "--reference", "demo", "--no-calls", "--json"
    )  # fmt: skip
    results = json.loads(capsys.readouterr().out)["results"]
    # t2t, as run_exp.py (response1 shown first): t2t/1 A right, t2t/2 A wrong.
    t2t = results["by_task"]["t2t"]
    assert t2t["accuracy_without_ties"]["value"] == pytest.approx(1 / 2)
    # t2a, as run_exp_t2a.py (response2 shown first): t2a/1 B right; t2a/2, a tie, B wrong.
    t2a = results["by_task"]["t2a"]
    assert t2a["accuracy_without_ties"]["value"] == pytest.approx(1 / 1)
    assert t2a["accuracy_with_ties"]["value"] == pytest.approx(1 / 2)
