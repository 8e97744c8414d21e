"""A disabled judge is never called, on any path (docs/judges.md, "Disabling a judge"):
best-of-N and judge evaluations over the API and the command line are refused naming the
judge, as filter runs are, and work queued before it was disabled fails instead of calling
it. The loopback server counts every call: none reaches it."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import PairStatus
from judges.evaluation.services import judge_evaluation_create, judge_evaluation_judge_batch
from judges.models import FilterRun, JudgeEvaluation
from judges.runs.services import filter_run_judge_batch
from tests.factories import FilterRunFactory
from tests.judges.evaluation_support import labelled_pairs
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]

REFUSAL = "Disabled judges cannot run: fake-judge."
ITEM = {
    "id": "p1",
    "prompt": "Say hello",
    "candidates": [{"id": "a", "content": "GOOD hello"}, {"id": "b", "content": "hi"}],
}


def disable(judge):
    judge.enabled = False
    judge.save(update_fields=["enabled"])


def test_best_of_n_refuses_a_disabled_judge_over_the_api_and_the_command(
    project, marker_judge, marker_server, dave, api_for, tmp_path
):
    disable(marker_judge)
    answer = api_for(dave).post(
        "/api/v1/projects/demo/best-of-n/", {"judge": "fake-judge", "items": [ITEM]}, format="json"
    )
    assert answer.status_code == 400, answer.content
    assert answer.json()["judge"] == [REFUSAL]
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps(ITEM) + "\n")
    with pytest.raises(CommandError, match=REFUSAL):
        call_command("best_of_n", "fake-judge", str(path))
    assert marker_server.request_count == 0


def test_an_evaluation_refuses_a_disabled_judge_over_the_api_and_the_command(
    project, marker_judge, marker_server, carol, api_for, django_capture_on_commit_callbacks
):
    labelled_pairs(project, "AB")
    disable(marker_judge)
    api = api_for(carol)
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post(
            "/api/v1/projects/demo/judge-evaluations/", {"judge": "fake-judge"}, format="json"
        )
    assert answer.status_code == 400, answer.content
    assert answer.json()["judge"] == [REFUSAL]
    with pytest.raises(CommandError, match=REFUSAL):
        call_command("evaluate_judge", "fake-judge", "--project", "demo", "--timeout", "5")
    assert not JudgeEvaluation.objects.exists()
    # Scoring the answers on hand calls nothing, so it stays allowed.
    with django_capture_on_commit_callbacks(execute=True):
        scored = api.post(
            "/api/v1/projects/demo/judge-evaluations/",
            {"judge": "fake-judge", "call": False},
            format="json",
        )
    assert scored.status_code == 202, scored.content
    resumed = api.post(f"/api/v1/projects/demo/judge-evaluations/{scored.json()['id']}/resume/")
    assert resumed.status_code == 400
    assert resumed.json()["judge"] == [REFUSAL]
    assert marker_server.request_count == 0


def test_work_queued_before_the_judge_was_disabled_fails_without_calling_it(
    project, marker_judge, marker_server, carol
):
    pairs = labelled_pairs(project, "AB")
    evaluation = judge_evaluation_create(judge=marker_judge, project=project, created_by=carol)
    run = FilterRunFactory(
        project=project, number=1, status=FilterRun.Status.RUNNING, created_by=carol
    )
    run.judges.set([marker_judge])
    run.pairs.set(pairs)
    project.pairs.update(status=PairStatus.JUDGING)
    disable(marker_judge)
    items = [[pair.pk, order] for pair in pairs for order in ("AB", "BA")]

    judge_evaluation_judge_batch(evaluation_id=evaluation.pk, items=items)
    filter_run_judge_batch(run_id=run.pk, work=[[marker_judge.pk, items]])

    evaluation.refresh_from_db()
    run.refresh_from_db()
    assert evaluation.status == JudgeEvaluation.Status.FAILED
    assert evaluation.error == f"{REFUSAL} Enable it and resume the evaluation."
    assert run.status == FilterRun.Status.FAILED
    assert run.error == f"{REFUSAL} Enable it and resume the run."
    assert marker_server.request_count == 0
