"""Filter runs with Celery eager: both orders, the ensemble rule, budgets, retries, idempotent
batches, one finalizer, cancel, failure and resume, and the run_filter command."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from annotation.models import Pair, PairStatus
from config.celery import app
from judges import backends
from judges.backends.base import JudgeResult
from judges.models import FilterRun, Judge, Verdict
from judges.runs import services as runs
from tests.factories import PairFactory
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    first_shown,
    make_judges,
    ok,
    outcome,
    truth,
    use_scripted_judges,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]


def start(django_capture_on_commit_callbacks, **kwargs) -> FilterRun:
    """Creates a run and lets its on-commit enqueue run (eagerly) to the end."""
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.filter_run_create(**kwargs)
    run.refresh_from_db()
    return run


def pairs_with_truth(project, *truths: str, task: str = "text") -> list[Pair]:
    return [PairFactory(project=project, task=task, metadata={"truth": side}) for side in truths]


def test_every_judge_sees_every_pair_in_both_orders(
    monkeypatch, project, django_capture_on_commit_callbacks
):
    calls = use_scripted_judges(monkeypatch, {"j1": truth(), "j2": truth(), "j3": truth()})
    judges = make_judges("j1", "j2", "j3")
    pairs = pairs_with_truth(project, "A", "B", "A", "B")
    run = start(django_capture_on_commit_callbacks, project=project, judges=judges)

    assert run.status == FilterRun.Status.SUCCEEDED
    keys = set(Verdict.objects.filter(run=run).values_list("judge__name", "pair_id", "order"))
    assert keys == {(j.name, p.pk, o) for j in judges for p in pairs for o in ("AB", "BA")}
    assert len(calls) == 3 * 4 * 2
    for _, item in calls:
        pair = next(p for p in pairs if p.pk == item.pair_id)
        shown = (pair.response_a, pair.response_b)
        if item.order == "BA":
            shown = shown[::-1]
        assert (item.first, item.second) == (shown[0].content, shown[1].content)
        assert item.allow_tie is True  # the project is ternary


def test_easy_pairs_are_filtered_and_contested_pairs_queued(
    monkeypatch, project, django_capture_on_commit_callbacks
):
    # j1..j8 follow the truth; j9 prefers the first shown: on "A" pairs 17 of 18 votes say A,
    # the fewest that hold 90% (easy at 0.9)
    answers = {f"j{i}": truth() for i in range(1, 9)} | {"j9": first_shown()}
    use_scripted_judges(monkeypatch, answers)
    judges = make_judges(*answers)
    easy_a, clear_b = pairs_with_truth(project, "A", "B")
    queued_before = PairFactory(project=project, status=PairStatus.QUEUED)
    run = start(django_capture_on_commit_callbacks, project=project, judges=judges)

    easy_a.refresh_from_db()
    clear_b.refresh_from_db()
    assert (easy_a.status, easy_a.ensemble_label) == (PairStatus.EASY, "A")
    assert easy_a.ensemble_agreement == pytest.approx(17 / 18)
    assert easy_a.ensemble_summary["votes"] == {"A": 17, "B": 1, "tie": 0}
    assert easy_a.ensemble_summary["judges"]["j9"] == {"AB": "A", "BA": "B"}
    assert (clear_b.status, clear_b.ensemble_label, clear_b.ensemble_agreement) == (
        PairStatus.EASY,
        "B",
        pytest.approx(17 / 18),
    )
    # only imported pairs are judged
    assert not queued_before.filter_runs.exists()
    assert run.summary["easy"] == 2
    assert run.summary["queued"] == 0

    # with j8 against the truth too, 15 of 18 (83%) is not easy: the pair goes to annotators
    answers["j8"] = canonical("B")
    contested = pairs_with_truth(project, "A")[0]
    start(django_capture_on_commit_callbacks, project=project, judges=judges)
    contested.refresh_from_db()
    assert contested.status == PairStatus.QUEUED
    assert contested.ensemble_label == "A"
    assert contested.ensemble_agreement == pytest.approx(15 / 18)


def test_position_bias_scores_zero_consistency_and_cancels_out(
    monkeypatch, project, django_capture_on_commit_callbacks
):
    use_scripted_judges(monkeypatch, {"fair": canonical("A"), "biased": first_shown()})
    judges = make_judges("fair", "biased")
    pairs = pairs_with_truth(project, "A", "A", "A")
    run = start(django_capture_on_commit_callbacks, project=project, judges=judges)

    stats = run.summary["judges"]
    assert stats["biased"]["position_consistency"] == 0.0
    assert stats["fair"]["position_consistency"] == 1.0
    assert stats["biased"]["agreement"] == 0.5
    for pair in Pair.objects.filter(pk__in=[p.pk for p in pairs]):
        # the biased judge gave one A and one B per pair: 3 of 4 votes, not easy at 0.9
        assert pair.ensemble_summary["judges"]["biased"] == {"AB": "A", "BA": "B"}
        assert pair.ensemble_summary["votes"] == {"A": 3, "B": 1, "tie": 0}
        assert pair.status == PairStatus.QUEUED


def test_invalid_answers_are_not_votes_and_no_votes_is_not_easy(
    monkeypatch, project, django_capture_on_commit_callbacks
):
    use_scripted_judges(
        monkeypatch,
        {
            "good": canonical("A"),
            "garbled": outcome("unparseable", raw="hmm", error="no JSON"),
            "broken": outcome("error", error="HTTP 400: bad request"),
            "shrug": outcome("abstain"),
        },
    )
    judges = make_judges("good", "garbled", "broken", "shrug")
    pair = PairFactory(project=project)
    run = start(
        django_capture_on_commit_callbacks, project=project, judges=judges, min_valid_votes=2
    )
    pair.refresh_from_db()
    # 2 valid votes, both A: easy with a minimum of 2; 6 invalid answers do not dilute the share
    assert pair.status == PairStatus.EASY
    assert pair.ensemble_summary["invalid"] == 6
    assert run.summary["judges"]["garbled"]["unparseable"] == 2
    assert run.summary["judges"]["broken"]["error"] == 2
    assert run.summary["judges"]["shrug"]["abstain"] == 2
    # with the default minimum, one valid vote per judge (4), the same 2 of 2 are too few
    few = PairFactory(project=project)
    run = start(django_capture_on_commit_callbacks, project=project, judges=judges)
    few.refresh_from_db()
    assert run.min_valid_votes == 4
    assert (few.status, few.ensemble_label) == (PairStatus.QUEUED, "A")
    assert run.summary["too_few_votes"] == 1

    nobody = PairFactory(project=project)
    run = start(
        django_capture_on_commit_callbacks, project=project, judges=judges[1:], threshold=0.6
    )
    nobody.refresh_from_db()
    assert nobody.status == PairStatus.QUEUED
    assert nobody.ensemble_label == ""
    assert nobody.ensemble_agreement is None
    assert run.summary["no_votes"] == 1


def test_budget_queues_only_the_most_contested_per_task(
    monkeypatch, project, django_capture_on_commit_callbacks
):
    # "split" pairs: j1 says A, j2 says B (agreement 0.5); "lean" pairs: j2 says A too except in
    # BA order (agreement 0.75); "clear" pairs: all A (easy)
    def j2(item):
        kind = item.metadata["kind"]
        side = "B" if kind == "split" or (kind == "lean" and item.order == "BA") else "A"
        return ok(item.shown_preference(side))

    use_scripted_judges(monkeypatch, {"j1": canonical("A"), "j2": j2})
    judges = make_judges("j1", "j2")
    made = {}
    for task in ("t2i", "edit"):
        for kind in ("split", "lean", "clear"):
            made[task, kind] = PairFactory(project=project, task=task, metadata={"kind": kind})
    run = start(
        django_capture_on_commit_callbacks, project=project, judges=judges, budget_per_task=1
    )
    status = {key: Pair.objects.get(pk=p.pk).status for key, p in made.items()}
    for task in ("t2i", "edit"):
        assert status[task, "split"] == PairStatus.QUEUED
        assert status[task, "lean"] == PairStatus.IMPORTED  # over budget: a later run may take it
        assert status[task, "clear"] == PairStatus.EASY
    assert (run.summary["queued"], run.summary["returned"], run.summary["easy"]) == (2, 2, 2)
    assert Pair.objects.get(pk=made["t2i", "lean"].pk).ensemble_agreement == 0.75


def test_a_batch_run_twice_writes_one_verdict_per_key(monkeypatch, project):
    calls = use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    (judge,) = make_judges("j1")
    pairs = PairFactory.create_batch(3, project=project)
    run = runs.filter_run_create(project=project, judges=[judge])  # on-commit not executed
    runs.filter_run_start(run_id=run.pk) if False else FilterRun.objects.filter(pk=run.pk).update(
        status=FilterRun.Status.RUNNING
    )
    items = [[p.pk, order] for p in pairs for order in ("AB", "BA")]
    runs.filter_run_judge_batch(run_id=run.pk, work=[[judge.pk, items]])
    assert len(calls) == 6
    runs.filter_run_judge_batch(run_id=run.pk, work=[[judge.pk, items]])
    assert len(calls) == 6  # the second delivery finds every verdict and calls nobody
    assert Verdict.objects.filter(run=run).count() == 6

    # two deliveries racing past the "already done" check both write: the key keeps one
    verdict = Verdict.objects.filter(run=run).first()
    duplicate = Verdict(
        run=run, judge=judge, pair_id=verdict.pair_id, order=verdict.order, outcome="ok", side="B"
    )
    Verdict.objects.bulk_create([duplicate], ignore_conflicts=True)
    assert (
        Verdict.objects.filter(run=run, pair_id=verdict.pair_id, order=verdict.order).count() == 1
    )


def test_transient_errors_are_retried_then_recorded(
    monkeypatch, project, settings, django_capture_on_commit_callbacks
):
    settings.ARBITER_JUDGE_MAX_ATTEMPTS = 3
    seen: dict[tuple, int] = {}

    def flaky(item):
        key = (item.pair_id, item.order)
        seen[key] = seen.get(key, 0) + 1
        if item.metadata["kind"] == "recovers" and seen[key] == 1:
            return JudgeResult(outcome="error", error="HTTP 429", transient=True, attempts=2)
        if item.metadata["kind"] == "down":
            return JudgeResult(outcome="error", error="HTTP 503", transient=True)
        if item.metadata["kind"] == "refused":
            return JudgeResult(outcome="error", error="HTTP 400: bad request")
        return ok(item.shown_preference("A"))

    use_scripted_judges(monkeypatch, {"flaky": flaky})
    judges = make_judges("flaky")
    recovers = PairFactory(project=project, metadata={"kind": "recovers"})
    down = PairFactory(project=project, metadata={"kind": "down"})
    refused = PairFactory(project=project, metadata={"kind": "refused"})
    countdowns = []
    real_countdown = runs.retry_countdown
    monkeypatch.setattr(
        runs, "retry_countdown", lambda a: countdowns.append(a) or real_countdown(a)
    )
    run = start(django_capture_on_commit_callbacks, project=project, judges=judges)

    assert run.status == FilterRun.Status.SUCCEEDED
    verdicts = {(v.pair_id, v.order): v for v in Verdict.objects.filter(run=run)}
    assert verdicts[recovers.pk, "AB"].outcome == "ok"
    assert verdicts[recovers.pk, "AB"].attempts == 3  # two calls in the backend, then one
    assert seen[recovers.pk, "AB"] == 2
    assert verdicts[down.pk, "BA"].outcome == "error"
    assert seen[down.pk, "BA"] == 3
    assert "HTTP 503" in verdicts[down.pk, "BA"].error
    assert verdicts[refused.pk, "AB"].outcome == "error"
    assert seen[refused.pk, "AB"] == 1
    assert countdowns
    assert set(countdowns) <= {1, 2}


def test_retry_backoff_grows_with_jitter_under_a_cap(settings):
    settings.ARBITER_JUDGE_RETRY_BASE_MS = 1000
    settings.ARBITER_JUDGE_RETRY_CAP_MS = 5000
    first = [runs.retry_countdown(1) for _ in range(50)]
    third = [runs.retry_countdown(3) for _ in range(50)]
    late = [runs.retry_countdown(10) for _ in range(50)]
    assert all(0.5 <= s <= 1 for s in first)
    assert len(set(first)) > 1
    assert all(2 <= s <= 4 for s in third)
    assert all(2.5 <= s <= 5 for s in late)


def test_exactly_one_finalizer_wins(monkeypatch, project, django_capture_on_commit_callbacks):
    use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    judges = make_judges("j1")
    pair = PairFactory(project=project)
    run = runs.filter_run_create(project=project, judges=judges)
    FilterRun.objects.filter(pk=run.pk).update(status=FilterRun.Status.RUNNING)
    for order in ("AB", "BA"):
        Verdict.objects.create(
            run=run, judge=judges[0], pair=pair, order=order, outcome="ok", side="A"
        )
    assert runs.filter_run_finish_if_complete(run_id=run.pk) is True
    pair.refresh_from_db()
    assert pair.status == PairStatus.EASY
    # a late finalizer (another batch, a resume) changes nothing
    Pair.objects.filter(pk=pair.pk).update(status=PairStatus.QUEUED)
    assert runs.filter_run_finish(run=run) is False
    assert runs.filter_run_finish_if_complete(run_id=run.pk) is False
    assert Pair.objects.get(pk=pair.pk).status == PairStatus.QUEUED


def test_cancel_returns_pairs_and_stops_batches(monkeypatch, project):
    calls = use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    (judge,) = make_judges("j1")
    pair = PairFactory(project=project)
    run = runs.filter_run_create(project=project, judges=[judge])
    assert Pair.objects.get(pk=pair.pk).status == PairStatus.JUDGING
    assert runs.filter_run_cancel(run=run) is True
    assert run.status == FilterRun.Status.CANCELLED
    assert Pair.objects.get(pk=pair.pk).status == PairStatus.IMPORTED
    runs.filter_run_start(run_id=run.pk)
    runs.filter_run_judge_batch(run_id=run.pk, work=[[judge.pk, [[pair.pk, "AB"]]]])
    assert calls == []
    assert not Verdict.objects.exists()
    assert runs.filter_run_cancel(run=run) is False
    with pytest.raises(ValidationError, match="cannot resume"):
        runs.filter_run_resume(run=run)


def test_a_crashing_judge_fails_the_run_and_resume_finishes_it(
    monkeypatch, project, django_capture_on_commit_callbacks
):
    def crash(item):
        raise RuntimeError("backend bug")

    answers = {"j1": crash}
    use_scripted_judges(monkeypatch, answers)
    # as in a worker, the task's failure is handled (on_failure) rather than raised
    judges = make_judges("j1")
    pair = PairFactory(project=project)
    app.conf.task_eager_propagates = False
    try:
        start(django_capture_on_commit_callbacks, project=project, judges=judges)
    finally:
        app.conf.task_eager_propagates = True
    run = FilterRun.objects.get()
    assert run.status == FilterRun.Status.FAILED
    assert "RuntimeError: backend bug" in run.error
    assert Pair.objects.get(pk=pair.pk).status == PairStatus.JUDGING

    answers["j1"] = canonical("B")
    assert runs.filter_run_resume(run=run) == 2
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    assert run.error == ""
    assert Pair.objects.get(pk=pair.pk).status == PairStatus.EASY


def test_resume_enqueues_only_what_is_missing(monkeypatch, project):
    calls = use_scripted_judges(monkeypatch, {"j1": canonical("A"), "j2": canonical("A")})
    judges = make_judges("j1", "j2")
    pairs = PairFactory.create_batch(3, project=project)
    # the start message was lost (never executed) and one verdict was written before a crash
    run = runs.filter_run_create(project=project, judges=judges)
    Verdict.objects.create(
        run=run, judge=judges[0], pair=pairs[0], order="AB", outcome="ok", side="A"
    )
    assert runs.filter_run_resume(run=run) == 11
    assert len(calls) == 11
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    assert Verdict.objects.filter(run=run).count() == 12
    # resuming a finished run is refused
    with pytest.raises(ValidationError, match="succeeded"):
        runs.filter_run_resume(run=run)


def test_create_rejects_bad_options(project):
    (judge,) = make_judges("j1")
    disabled = make_judges("off")[0]
    disabled.enabled = False
    disabled.save(update_fields=["enabled"])
    with pytest.raises(ValidationError) as err:
        runs.filter_run_create(project=project, judges=[judge])
    assert "pairs" in err.value.message_dict
    PairFactory(project=project)
    for kwargs, field in (
        ({"judges": []}, "judges"),
        ({"judges": [disabled]}, "judges"),
        ({"judges": [judge], "threshold": 0.5}, "threshold"),
        ({"judges": [judge], "threshold": 1.2}, "threshold"),
        ({"judges": [judge], "budget_per_task": 0}, "budget_per_task"),
        ({"judges": [judge], "min_valid_votes": 0}, "min_valid_votes"),
        ({"judges": [judge], "min_valid_votes": 3}, "min_valid_votes"),  # 1 judge: 2 at most
    ):
        with pytest.raises(ValidationError) as err:
            runs.filter_run_create(project=project, **kwargs)
        assert field in err.value.message_dict
    assert not FilterRun.objects.exists()


@pytest.mark.django_db(transaction=True)  # the enqueue happens on commit, before the wait
@pytest.mark.timeout(60)
def test_run_filter_command_waits_and_summarises(monkeypatch, project, capsys):
    use_scripted_judges(monkeypatch, {"j1": canonical("A"), "j2": first_shown()})
    make_judges("j1", "j2")
    PairFactory.create_batch(4, project=project)
    call_command("run_filter", project.slug, "--judges", "j1,j2", "--threshold", "0.75", "--wait")
    out = capsys.readouterr().out
    assert "4 pairs x 2 judges x 2 orders = 16 verdicts" in out
    assert "easy when one side holds at least 75% of the valid votes: 3 of 4 with 2 judges" in out
    assert "16/16 100%" in out
    assert "j1 8/8" in out
    assert "4 pairs, 4 easy, 0 queued" in out
    j2 = next(line for line in out.splitlines() if line.startswith("j2 "))
    assert j2.split()[1:4] == ["8", "50%", "0%"]  # verdicts, agreement, consistency


def test_run_filter_command_without_wait_prints_the_run(monkeypatch, project, capsys):
    use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    make_judges("j1")
    PairFactory.create_batch(2, project=project)
    call_command("run_filter", project.slug)
    run = FilterRun.objects.get()
    out = capsys.readouterr().out
    assert f"Filter run {run.number} on {project.slug}" in out
    # the default threshold, 90%, in votes: both of one judge's two
    assert "at least 90% of the valid votes: 2 of 2 with 1 judge in both orders" in out
    assert run.status == FilterRun.Status.PENDING  # nothing ran: the enqueue waits for commit


def test_run_filter_command_errors(project):
    make_judges("j1")
    with pytest.raises(CommandError, match="No project with slug 'nope'"):
        call_command("run_filter", "nope")
    with pytest.raises(CommandError, match="no imported pairs"):
        call_command("run_filter", project.slug)
    PairFactory(project=project)
    with pytest.raises(CommandError, match="unknown judges ghost"):
        call_command("run_filter", project.slug, "--judges", "j1,ghost")
    with pytest.raises(CommandError, match="threshold"):
        call_command("run_filter", project.slug, "--threshold", "0.3")


def test_run_filter_refuses_another_projects_judge_like_an_unknown_one(
    monkeypatch, project, other_project
):
    use_scripted_judges(monkeypatch, {"mine": canonical("A"), "theirs": canonical("A")})
    mine, theirs = make_judges("mine", "theirs")
    theirs.projects.set([other_project])
    PairFactory(project=project)
    with pytest.raises(CommandError, match=r"^--judges: unknown judges theirs$"):
        call_command("run_filter", project.slug, "--judges", "mine,theirs")
    assert not FilterRun.objects.exists()
    call_command("run_filter", project.slug)  # every enabled judge the project may use
    assert list(FilterRun.objects.get().judges.all()) == [mine]


def test_a_worker_builds_each_judge_backend_once_until_its_settings_change(
    monkeypatch, project, settings, django_capture_on_commit_callbacks
):
    settings.ARBITER_JUDGE_BATCH_PAIRS = 1  # one batch per pair
    use_scripted_judges(monkeypatch, {"rm": canonical("A")})
    built = []
    real = backends.get_backend
    monkeypatch.setattr(
        backends, "get_backend", lambda judge: built.append(judge.pk) or real(judge)
    )
    (judge,) = make_judges("rm")
    PairFactory.create_batch(3, project=project)
    start(django_capture_on_commit_callbacks, project=project, judges=[judge])
    assert built == [judge.pk]  # three batches, one backend (a reward model loads once)
    judge.timeout_s = 5
    judge.save(update_fields=["timeout_s"])
    PairFactory(project=project)
    start(django_capture_on_commit_callbacks, project=project, judges=[judge])
    assert built == [judge.pk, judge.pk]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_run_filter_wait_resumes_a_stalled_run(monkeypatch, project, capsys):
    from judges import tasks

    use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    make_judges("j1")
    PairFactory.create_batch(2, project=project)
    # the start message is lost on its way to the broker
    monkeypatch.setattr(tasks.filter_run_start, "apply_async", lambda *a, **k: None)
    call_command(
        "run_filter", project.slug, "--wait", "--interval", "0.1", "--stall-seconds", "0.3"
    )
    out = capsys.readouterr().out
    assert "No verdict for 0.3s: resumed, 4 calls re-enqueued" in out
    assert FilterRun.objects.get().status == FilterRun.Status.SUCCEEDED

    PairFactory(project=project)
    run = runs.filter_run_create(project=project, judges=list(Judge.objects.all()))
    call_command("run_filter", project.slug, "--resume", str(run.number))
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    with pytest.raises(CommandError, match="succeeded; it cannot resume"):
        call_command("run_filter", project.slug, "--resume", str(run.number))
