"""Filter runs on a real Celery worker (Redis) against the loopback OpenAI-compatible server:
malformed answers, 429, 500 and timeouts end to end, and a worker SIGKILLed mid-run, recovered
by redelivery or, when its messages are lost, by Celery beat's sweep of stalled runs; a batch
whose pool process is SIGKILLed twice is quarantined."""

from __future__ import annotations

import os
import signal
import time
from itertools import count

import psutil
import pytest
import redis

from annotation.core.jobs import quarantine_reason
from annotation.models import Pair, PairStatus, TaskAttempt
from config.queues import QUEUES
from judges.models import FilterRun, Judge, Verdict
from judges.runs import services as runs
from tests.celery_worker import time_limits_env
from tests.factories import JudgeFactory, make_prompt, make_response
from tests.judges.fake_openai import (
    FakeOpenAI,
    by_marker,
    malformed,
    per_item,
    sleep,
    status,
)

KEY_ENV = "ARBITER_JUDGE_KEY_RUN_TEST"
SECRET = "sk-run-test-5d4c3b2a-NEVER-STORED"
# Fast retries and small batches, so each test takes seconds.
WORKER_ENV = {
    KEY_ENV: SECRET,
    "ARBITER_JUDGE_MAX_ATTEMPTS": "3",
    "ARBITER_JUDGE_RETRY_BASE_MS": "100",
    "ARBITER_JUDGE_RETRY_CAP_MS": "300",
    "ARBITER_JUDGE_BATCH_PAIRS": "1",
}
_numbers = count()


def make_pair(project, first: str, second: str) -> Pair:
    n = next(_numbers)
    return Pair.objects.create(
        project=project,
        external_id=f"w{n}",
        prompt=make_prompt(project, f"Question {n}"),
        response_a=make_response(project, "m1", f"{first} {n}"),
        response_b=make_response(project, "m2", f"{second} {n}"),
        target_votes=3,
    )


def make_judge(server: FakeOpenAI, name: str, **fields) -> Judge:
    defaults = {
        "kind": "openai",
        "base_url": server.base_url,
        "model": name,  # the server's rule dispatches on the model name
        "api_key_env": KEY_ENV,
        "timeout_s": 0.5,
        "concurrency": 4,
        # no retries inside the backend: transient failures go back to the queue
        "options": {"max_retries": 0},
    }
    return JudgeFactory(name=name, **{**defaults, **fields})


def wait_for(run: FilterRun, *, timeout: float) -> FilterRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.finished:
            return run
        time.sleep(0.2)
    raise AssertionError(
        f"run still {run.status} after {timeout}s with "
        f"{Verdict.objects.filter(run=run).count()} of {runs.expected_verdicts(run)} verdicts"
    )


def assert_one_verdict_per_key(run: FilterRun) -> None:
    keys = list(Verdict.objects.filter(run=run).values_list("judge_id", "pair_id", "order"))
    expected = {
        (judge.pk, pair.pk, order)
        for judge in run.judges.all()
        for pair in run.pairs.all()
        for order in ("AB", "BA")
    }
    assert len(keys) == len(set(keys)) == len(expected)
    assert set(keys) == expected


@pytest.mark.timeout(120)
def test_a_worker_runs_a_filter_through_bad_answers_and_transient_failures(
    celery_worker_process, project
):
    flaky = per_item([status(429, retry_after="0"), status(500)], then=by_marker("GOOD"))

    def garbled(request):
        shown = request.response_text(1) + request.response_text(2)
        if "GARBLE" in shown:
            return malformed()
        if "SLOW" in shown:
            return sleep(2.0)(request)  # past the judge's 0.5 s timeout
        return by_marker("GOOD")(request)

    rules = {"steady": by_marker("GOOD"), "flaky": flaky, "garbled": garbled}
    with FakeOpenAI(lambda request: rules[request.body["model"]](request)) as server:
        judges = [make_judge(server, name) for name in rules]
        plain = make_pair(project, "GOOD answer", "weak answer")
        unparseable = make_pair(project, "GOOD answer GARBLE", "weak answer")
        timing_out = make_pair(project, "GOOD answer SLOW", "weak answer")
        # both contain the marker: every judge prefers the second shown, so votes cancel out
        contested = make_pair(project, "GOOD one", "GOOD two")
        worker = celery_worker_process(extra_env=WORKER_ENV)
        run = runs.filter_run_create(project=project, judges=judges)
        run = wait_for(run, timeout=90)

        assert run.status == FilterRun.Status.SUCCEEDED, run.error
        assert_one_verdict_per_key(run)
        verdicts = {
            (v.judge.name, v.pair_id, v.order): v
            for v in Verdict.objects.filter(run=run).select_related("judge")
        }
        for pair in (plain, unparseable, timing_out):
            for order in ("AB", "BA"):
                # 429, then 500, then an answer: the third attempt of the batch item
                assert verdicts["flaky", pair.pk, order].outcome == "ok"
                assert verdicts["flaky", pair.pk, order].side == "A"
                assert verdicts["flaky", pair.pk, order].attempts == 3
                assert verdicts["steady", pair.pk, order].side == "A"
        for order in ("AB", "BA"):
            bad = verdicts["garbled", unparseable.pk, order]
            assert bad.outcome == "unparseable"
            assert "{not json" in bad.raw
            late = verdicts["garbled", timing_out.pk, order]
            assert late.outcome == "error"
            assert "timed out" in late.error
            assert late.attempts == 3
        assert verdicts["steady", contested.pk, "AB"].side == "B"
        assert verdicts["steady", contested.pk, "BA"].side == "A"

        statuses = dict(Pair.objects.filter(project=project).values_list("pk", "status"))
        assert statuses[plain.pk] == statuses[unparseable.pk] == PairStatus.EASY
        assert statuses[timing_out.pk] == PairStatus.EASY  # 4 of 4 valid votes say A
        assert statuses[contested.pk] == PairStatus.QUEUED
        assert run.summary["judges"]["garbled"]["unparseable"] == 2
        assert run.summary["judges"]["steady"]["position_consistency"] == 0.75

        # the key went to the server and nowhere else
        assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in server.requests)
        stored = Verdict.objects.filter(run=run).values_list("raw", "error", "reasoning")
        assert not any(SECRET in " ".join(row) for row in stored)
        assert SECRET not in run.error + str(run.summary)
        assert SECRET not in worker.log()


def _start_run_and_kill_its_worker(celery_worker_process, project, server) -> FilterRun:
    """Two judges on four pairs, one worker killed mid-batch: its task was delivered, not
    acknowledged. A batch is in flight once the server holds calls without a verdict yet."""
    judges = [make_judge(server, name, concurrency=2, timeout_s=5) for name in ("j1", "j2")]
    for _ in range(4):
        make_pair(project, "GOOD answer", "weak answer")
    first = celery_worker_process(extra_env=WORKER_ENV, concurrency=1)
    run = runs.filter_run_create(project=project, judges=judges)
    deadline = time.monotonic() + 60
    while Verdict.objects.filter(run=run).count() < 2 or (
        server.request_count - Verdict.objects.filter(run=run).count() < 2
    ):
        assert time.monotonic() < deadline, first.log()
        time.sleep(0.02)
    first.kill()
    return run


@pytest.mark.timeout(120)
def test_a_worker_killed_mid_run_loses_nothing(celery_worker_process, project):
    with FakeOpenAI(by_marker("GOOD"), delay_s=0.5) as server:
        run = _start_run_and_kill_its_worker(celery_worker_process, project, server)
        calls_before_kill = server.request_count
        assert Verdict.objects.filter(run=run).count() < 16
        run.refresh_from_db()
        assert run.status == FilterRun.Status.RUNNING

        # the killed worker's unacknowledged task returns once the visibility timeout passed
        # (every task's time limits stay below it: docs/operations.md, "Time limits")
        time.sleep(2)
        short = time_limits_env(3)
        limits = {**short, "ARBITER_TASK_KILL_AFTER_S": "1", "CELERY_VISIBILITY_S": "5"}
        celery_worker_process(extra_env={**WORKER_ENV, **limits})
        run = wait_for(run, timeout=90)
        calls = server.request_count

    assert run.status == FilterRun.Status.SUCCEEDED, run.error
    assert_one_verdict_per_key(run)
    assert set(Verdict.objects.filter(run=run).values_list("outcome", "side")) == {("ok", "A")}
    assert set(run.pairs.values_list("status", flat=True)) == {PairStatus.EASY}
    # the batch cut short was delivered again and its calls made again
    assert calls > 16
    assert calls_before_kill < calls


def _lose_queued_messages() -> None:
    """What a lost broker state or a dead worker's unacknowledged prefetch looks like: the
    run's queued and in-flight messages are gone, so no redelivery can finish the run."""
    broker = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    broker.delete(*QUEUES, "unacked", "unacked_index")


@pytest.mark.timeout(120)
def test_beat_resumes_a_run_whose_worker_was_killed(celery_worker_process, project):
    with FakeOpenAI(by_marker("GOOD"), delay_s=0.5) as server:
        run = _start_run_and_kill_its_worker(celery_worker_process, project, server)
        _lose_queued_messages()
        assert Verdict.objects.filter(run=run).count() < 16
        run.refresh_from_db()
        assert run.status == FilterRun.Status.RUNNING
        assert run.resumed_at is None

        # nobody presses Resume: the new worker's beat finds the run stalled after 2 s
        second = celery_worker_process(
            extra_env={
                **WORKER_ENV,
                "ARBITER_STALLED_AFTER_S": "2",
                "ARBITER_RESUME_STALLED_EVERY_S": "1",
            },
            beat=True,
        )
        run = wait_for(run, timeout=90)

    assert run.status == FilterRun.Status.SUCCEEDED, second.log()
    assert run.resumed_at is not None
    assert_one_verdict_per_key(run)
    assert set(run.pairs.values_list("status", flat=True)) == {PairStatus.EASY}
    assert "judges.filter_runs_resume_stalled" in second.log()


@pytest.mark.timeout(120)
def test_a_worker_evaluates_a_judge_through_transient_failures(celery_worker_process, project):
    from judges.evaluation.services import judge_evaluation_create
    from judges.models import JudgeEvaluation, Judgement

    flaky = per_item([status(429, retry_after="0"), status(500)], then=by_marker("GOOD"))
    with FakeOpenAI(flaky) as server:
        judge = make_judge(server, "flaky")
        pairs = [make_pair(project, "GOOD answer", "weak answer") for _ in range(3)]
        Pair.objects.filter(pk__in=[p.pk for p in pairs]).update(
            status=PairStatus.CONSENSUS, consensus_label="A"
        )
        celery_worker_process(extra_env=WORKER_ENV)
        evaluation = judge_evaluation_create(judge=judge, project=project)
        deadline = time.monotonic() + 90
        while not evaluation.finished and time.monotonic() < deadline:
            time.sleep(0.2)
            evaluation.refresh_from_db()

        assert evaluation.status == JudgeEvaluation.Status.SUCCEEDED, evaluation.error
        judgements = Judgement.objects.filter(judge=judge)
        assert judgements.count() == 6  # one per pair and order, however often retried
        assert {(j.outcome, j.side, j.attempts) for j in judgements} == {("ok", "A", 3)}
        assert evaluation.calls == 18
        assert server.request_count == 18
        assert evaluation.results["overall"]["dual_accuracy"]["value"] == 1.0


def _kill_pool_process(worker) -> None:
    """SIGKILL the worker's pool process, as the out-of-memory killer would; the worker's
    main process gives the task's message back (``reject_on_worker_lost``) and starts
    another pool process."""
    (pool,) = psutil.Process(worker.process.pid).children()
    pool.send_signal(signal.SIGKILL)
    pool.wait(timeout=10)


@pytest.mark.timeout(120)
def test_a_batch_whose_pool_process_is_killed_twice_is_quarantined(celery_worker_process, project):
    with FakeOpenAI(sleep(20)) as server:  # a call that never ends before the kill
        judge = make_judge(server, "stuck", timeout_s=30)
        make_pair(project, "GOOD answer", "weak answer")
        worker = celery_worker_process(extra_env=WORKER_ENV, concurrency=1)
        run = runs.filter_run_create(project=project, judges=[judge])
        for delivery in (1, 2):
            deadline = time.monotonic() + 60
            # the delivery counted (before any work), and its calls under way
            while not (
                TaskAttempt.objects.filter(task=runs.BATCH_TASK, attempts=delivery).exists()
                and server.request_count >= delivery
            ):
                assert time.monotonic() < deadline, worker.log()
                time.sleep(0.05)
            _kill_pool_process(worker)
        run = wait_for(run, timeout=60)
        calls = server.request_count
        assert (run.status, run.error) == (FilterRun.Status.FAILED, quarantine_reason(2))
        assert not TaskAttempt.objects.exists()  # the message was acknowledged
        assert runs.filter_runs_resume_stalled() == []  # and the sweep leaves it failed
        time.sleep(3)
        assert server.request_count == calls  # nothing called the judge again
    assert not Verdict.objects.filter(run=run).exists()
    assert worker.log().count("quarantined after 2 attempts") == 1
