"""Judge evaluations end to end with Celery eager: answers on hand are reused (counted on the
loopback OpenAI-compatible server), imported judgements are scored alike, and the
evaluate_judge command (docs/judges-evaluation.md)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from annotation.models import PairStatus
from judges.evaluation.judgement_import import judgements_import
from judges.evaluation.services import consensus_target, judge_evaluation_create
from judges.models import Judge, JudgeEvaluation, Judgement, Verdict
from tests.factories import FilterRunFactory, JudgeFactory, PairFactory, make_response
from tests.judges.evaluation_support import labelled_pairs
from tests.judges.fake_openai import by_marker
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]


def evaluate_now(django_capture_on_commit_callbacks, **kwargs) -> JudgeEvaluation:
    with django_capture_on_commit_callbacks(execute=True):
        evaluation = judge_evaluation_create(**kwargs)
    evaluation.refresh_from_db()
    return evaluation


def test_cached_verdicts_are_reused_and_only_missing_answers_are_called(
    project, marker_judge, marker_server, django_capture_on_commit_callbacks
):
    pairs = labelled_pairs(project, "ABABAB")
    run = FilterRunFactory(project=project, number=1, status="succeeded")
    for pair in pairs[:3]:
        for order in ("AB", "BA"):
            Verdict.objects.create(
                run=run,
                judge=marker_judge,
                pair=pair,
                order=order,
                outcome="ok",
                side=pair.consensus_label,
            )
    # An error is no answer: that call is made again.
    Verdict.objects.create(run=run, judge=marker_judge, pair=pairs[3], order="AB", outcome="error")

    evaluation = evaluate_now(
        django_capture_on_commit_callbacks, judge=marker_judge, project=project
    )

    assert evaluation.status == JudgeEvaluation.Status.SUCCEEDED
    assert marker_server.request_count == 6  # pairs 3, 4 and 5 in both orders, each once
    assert evaluation.calls == 6
    assert set(Judgement.objects.values_list("pair_id", "order")) == {
        (pair.pk, order) for pair in pairs[3:] for order in ("AB", "BA")
    }
    overall = evaluation.results["overall"]
    assert overall["dual_accuracy"]["value"] == 1.0
    assert overall["dual_accuracy"]["n"] == 12
    assert overall["position_consistency"]["value"] == 1.0

    again = evaluate_now(django_capture_on_commit_callbacks, judge=marker_judge, project=project)
    assert again.pk == evaluation.pk  # one evaluation per (judge, target)
    assert marker_server.request_count == 6  # nothing called twice
    assert again.calls == 0
    assert again.results["overall"] == overall


def test_a_judge_that_always_picks_the_first_shown_scores_one_half(
    project, marker_judge, marker_server, django_capture_on_commit_callbacks
):
    labelled_pairs(project, "AABB")
    marker_server.reset(by_marker("NOWHERE", otherwise="1"))
    evaluation = evaluate_now(
        django_capture_on_commit_callbacks, judge=marker_judge, project=project
    )
    overall = evaluation.results["overall"]
    assert overall["dual_accuracy"]["value"] == 0.5
    assert overall["position_consistency"]["value"] == 0.0
    assert overall["first_shown_share"]["value"] == 1.0
    # Confidence 0.9 signed by side: +0.9 and -0.9 average to 0 on every pair.
    assert evaluation.results["tie_calibrated"]["margin"] == 0.0


def test_the_target_is_the_consensus_without_gold_or_undecided_pairs(project):
    decided = labelled_pairs(project, "AB")
    PairFactory(project=project, status=PairStatus.QUEUED)
    PairFactory(
        project=project, status=PairStatus.CONSENSUS, consensus_label="A", is_gold=True,
        gold_label="A",
    )  # fmt: skip
    same = PairFactory(
        project=project,
        status=PairStatus.CONSENSUS,
        consensus_label="tie",
        response_a=make_response(project, "m1", "one"),
        response_b=make_response(project, "m1", "two"),
    )
    target = consensus_target(project)
    assert [item.pair_id for item in target] == [p.pk for p in decided] + [same.pk]
    assert [item.same_model for item in target] == [False, False, True]
    assert target[-1].label == "tie"


def test_an_empty_target_or_a_judge_of_another_project_is_refused(
    project, other_project, marker_judge
):
    with pytest.raises(ValidationError, match="no labelled pairs"):
        judge_evaluation_create(judge=marker_judge, project=project)
    labelled_pairs(project, "A")
    marker_judge.projects.set([other_project])
    with pytest.raises(ValidationError, match="No judge 'fake-judge'"):
        judge_evaluation_create(judge=marker_judge, project=project)


def test_imported_judgements_are_scored_without_calls(project, marker_judge, marker_server):
    pairs = labelled_pairs(project, "ABA")
    lines = [
        json.dumps({"pair": "text-0", "order": "AB", "verdict": "A", "confidence": 0.8}),
        json.dumps({"pair": "text-0", "order": "BA", "score": 0.5}),
        json.dumps({"pair": "text-1", "order": "AB", "score": 0.2}),
        json.dumps({"pair": "text-1", "order": "BA", "score": -1.5}),
    ]
    assert judgements_import(judge=marker_judge, project=project, lines=lines) == 4
    evaluation = judge_evaluation_create(judge=marker_judge, project=project, call=False)
    assert marker_server.request_count == 0
    overall = evaluation.results["overall"]
    # Right: 0/AB, 0/BA, 1/BA of the four answers given (pair 2 has none: MMRB2 leaves
    # unanswered orders out); of the six the three pairs needed, strictly.
    assert overall["dual_accuracy"]["value"] == pytest.approx(3 / 4)
    assert overall["dual_accuracy_strict"]["value"] == pytest.approx(3 / 6)
    assert overall["dual_accuracy"]["answered"] == pytest.approx(4 / 6)
    assert evaluation.results["answers"] == {"expected": 6, "votes": 4, "answered": 4 / 6}
    imported = Judgement.objects.get(pair=pairs[1], order="BA")
    assert (imported.side, imported.margin, imported.source) == ("B", -1.5, "import")
    # Importing again replaces the answers for the same (pair, order).
    again = [json.dumps({"pair": "text-1", "order": "BA", "verdict": "A"})]
    judgements_import(judge=marker_judge, project=project, lines=again)
    assert Judgement.objects.get(pair=pairs[1], order="BA").side == "A"
    assert Judgement.objects.count() == 4


def test_a_bad_import_names_each_line_and_field_and_imports_nothing(project, marker_judge):
    labelled_pairs(project, "A")
    lines = [
        json.dumps({"pair": "text-0", "order": "AB", "verdict": "A"}),
        "{not json",
        json.dumps({"pair": "nope", "order": "AB", "verdict": "A"}),
        json.dumps({"pair": "text-0", "order": "up", "verdict": "left"}),
        json.dumps({"pair": "text-0", "order": "BA"}),
        json.dumps({"pair": "text-0", "order": "AB", "score": "high"}),
    ]
    with pytest.raises(ValidationError) as error:
        judgements_import(judge=marker_judge, project=project, lines=lines)
    assert error.value.messages == [
        "line 2: json: not valid JSON (unexpected character, expected a string key)",
        "line 3: pair: no pair 'nope' in project demo",
        "line 4: order: must be AB (A shown first) or BA",
        "line 4: verdict: must be A, B or tie",
        "line 5: verdict: give a verdict (A, B or tie) or a score",
        "line 6: score: must be a number (A minus B)",
    ]
    assert not Judgement.objects.exists()


def offline_judge(pairs) -> Judge:
    """A ``scores`` judge whose scores, in each pair's metadata, favour the labelled side.
    (The command tests run in transactions of their own, where an HTTP judge's event loop
    would meet the browser tests' one; docs/judges.md, "scores".)"""
    for pair in pairs:
        good = {"A": 0.9, "B": 0.1} if pair.consensus_label == "A" else {"A": 0.1, "B": 0.9}
        pair.metadata = {"scores": {"offline": good}}
        pair.save(update_fields=["metadata"])
    return JudgeFactory(name="offline", kind="scores")


@pytest.mark.django_db(transaction=True)  # the enqueue happens on commit, before the wait
def test_evaluate_judge_prints_json_and_refuses_unknown_names(project, capsys, tmp_path):
    offline_judge(labelled_pairs(project, "AB"))
    call_command("evaluate_judge", "offline", "--project", "demo", "--json", "--timeout", "30")
    out = json.loads(capsys.readouterr().out)
    assert out["judge"] == "offline"
    assert out["target"] == "demo"
    assert out["status"] == "succeeded"
    assert out["results"]["overall"]["dual_accuracy"]["value"] == 1.0
    assert out["calls"] == 4
    with pytest.raises(CommandError, match="No judge 'nobody'"):
        call_command("evaluate_judge", "nobody", "--project", "demo")
    with pytest.raises(CommandError, match="No project"):
        call_command("evaluate_judge", "offline", "--project", "missing")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"pair": "text-0", "order": "XY", "verdict": "A"}\n')
    with pytest.raises(CommandError, match="line 1: order"):
        call_command("evaluate_judge", "offline", "--project", "demo", "--import", str(bad))


def publish(project, user, version: str = "1.0.0"):
    from annotation.releases.services import release_build, release_create, release_publish

    release = release_create(project=project, version=version, selection={}, user=user)
    return release_publish(release=release_build(release=release), user=user)


def test_a_published_release_is_a_target_read_from_its_files(
    project, marker_judge, marker_server, dave, django_capture_on_commit_callbacks
):
    pairs = labelled_pairs(project, "ABA")
    publish(project, dave)
    # Changed after publishing: the release keeps the labels it was published with.
    pairs[0].consensus_label = "B"
    pairs[0].save(update_fields=["consensus_label"])
    evaluation = evaluate_now(
        django_capture_on_commit_callbacks, judge=marker_judge, project=project, release="1.0.0"
    )
    assert evaluation.target_name == "demo@1.0.0"
    assert [item[4] for item in evaluation.target] == ["A", "B", "A"]
    assert evaluation.results["overall"]["dual_accuracy"]["value"] == 1.0
    current = evaluate_now(django_capture_on_commit_callbacks, judge=marker_judge, project=project)
    assert current.pk != evaluation.pk
    assert marker_server.request_count == 6  # the consensus evaluation reused the release's answers
    assert current.results["overall"]["dual_accuracy"]["value"] == pytest.approx(4 / 6)


def test_only_a_published_release_of_the_project_is_a_target(project, marker_judge, dave):
    from annotation.releases.services import release_build, release_create

    labelled_pairs(project, "A")
    with pytest.raises(ValidationError, match=r"No release demo@9\.9\.9"):
        judge_evaluation_create(judge=marker_judge, project=project, release="9.9.9")
    release_build(release=release_create(project=project, version="1.0.0", selection={}, user=dave))
    with pytest.raises(ValidationError, match="is built, not published"):
        judge_evaluation_create(judge=marker_judge, project=project, release="1.0.0")


@pytest.mark.django_db(transaction=True)
def test_evaluate_judge_on_a_release(project, dave, capsys):
    offline_judge(labelled_pairs(project, "AB"))
    publish(project, dave, "0.1.0")
    call_command("evaluate_judge", "offline", "--release", "demo@0.1.0", "--timeout", "30")
    out = capsys.readouterr().out
    assert "offline on demo@0.1.0: 2 pairs" in out
    assert "dual_accuracy: 100.0%" in out
    with pytest.raises(CommandError, match=r"SLUG@X\.Y\.Z"):
        call_command("evaluate_judge", "offline", "--release", "demo")


def test_a_batch_delivered_twice_calls_and_records_each_answer_once(
    project, marker_judge, marker_server
):
    from judges.evaluation.services import judge_evaluation_judge_batch

    first, _ = labelled_pairs(project, "AB")
    evaluation = judge_evaluation_create(judge=marker_judge, project=project)  # not yet enqueued
    items = [[first.pk, "AB"], [first.pk, "BA"]]
    for _ in range(2):
        judge_evaluation_judge_batch(evaluation_id=evaluation.pk, items=items)
    assert marker_server.request_count == 2
    assert Judgement.objects.filter(pair=first).count() == 2
    evaluation.refresh_from_db()
    assert (evaluation.status, evaluation.calls) == ("running", 2)  # the other pair is missing


def test_a_stalled_evaluation_is_resumed_by_the_sweep_once(
    project, marker_judge, marker_server, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from judges.evaluation.services import judge_evaluations_resume_stalled

    labelled_pairs(project, "AB")
    stalled = judge_evaluation_create(judge=marker_judge, project=project)  # its enqueue lost
    assert judge_evaluations_resume_stalled() == []  # not stalled yet
    long_ago = timezone.now() - timedelta(seconds=settings.ARBITER_STALLED_AFTER_S + 1)
    JudgeEvaluation.objects.filter(pk=stalled.pk).update(progress_at=long_ago)

    assert judge_evaluations_resume_stalled() == [stalled.pk]
    stalled.refresh_from_db()
    assert stalled.status == JudgeEvaluation.Status.SUCCEEDED
    assert marker_server.request_count == 4
    assert judge_evaluations_resume_stalled() == []
