"""How a batch calls its judges (judges/runs/calls.py, docs/judges-runs.md "How a run
executes"): an HTTP judge keeps its connections and its bound on calls in flight from batch
to batch, a batch keeps every judge busy at once, answers are recorded as they come in, and a
cancelled run stops its batch's calls."""

from __future__ import annotations

import threading
import time

import pytest

from annotation.models import PairStatus
from judges import tasks
from judges.backends import get_backend
from judges.backends.base import JudgeResult
from judges.backends.event_loop import event_loop_stop
from judges.models import FilterRun, Verdict
from judges.runs import services as runs
from judges.runs.calls import ANSWERS_FLUSH_S, judge_backends_close, judges_call
from tests.factories import JudgeFactory, PairFactory
from tests.judges.backend_helpers import item
from tests.judges.fake_openai import FakeOpenAI, Reply, by_marker, verdict
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]


@pytest.fixture(autouse=True)
def _fresh_backends():
    judge_backends_close()
    yield
    judge_backends_close()


def http_judge(server: FakeOpenAI, name: str, concurrency: int):
    return JudgeFactory(
        name=name,
        kind="openai",
        base_url=server.base_url,
        model="m",
        concurrency=concurrency,
        timeout_s=10,
    )


def slow_for(marker: str, seconds: float):
    """Answers at once, but after ``seconds`` when the prompt holds ``marker``."""

    def rule(request) -> Reply:
        reply = verdict("1")
        reply.delay_s = seconds if marker in request.text else 0.0
        return reply

    return rule


def test_a_judge_reuses_its_connections_and_its_bound_across_batches():
    with FakeOpenAI(verdict("1"), delay_s=0.05) as server:
        backend = get_backend(http_judge(server, "reuse", concurrency=4))
        try:
            first = backend.judge_batch([item(pair_id=i) for i in range(12)])
            second = backend.judge_batch([item(pair_id=i) for i in range(12, 24)])
            # Two batches at once in one process still share the judge's 4 slots.
            results: list = []
            threads = [
                threading.Thread(
                    target=lambda: results.extend(
                        backend.judge_batch([item(pair_id=i) for i in range(8)])
                    )
                )
                for _ in range(2)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            backend.close()
    assert [r.outcome for r in first + second + results] == ["ok"] * 40
    assert server.request_count == 40
    assert server.connections <= 4
    assert server.max_in_flight == 4


def test_a_batch_keeps_every_judge_busy_at_once(project, django_capture_on_commit_callbacks):
    with FakeOpenAI(by_marker("GOOD"), delay_s=0.2) as server:
        judges = [http_judge(server, f"busy-{n}", concurrency=3) for n in range(2)]
        for _n in range(6):
            PairFactory(project=project, task="text")
        with django_capture_on_commit_callbacks(execute=True):
            run = runs.filter_run_create(project=project, judges=judges)
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    assert Verdict.objects.filter(run=run).count() == 2 * 6 * 2
    # Each judge at most 3 at once, and both judges together: one batch held them both.
    assert server.max_in_flight == 6


def test_answers_are_recorded_as_they_come_in():
    with FakeOpenAI(slow_for("SLOW", 3 * ANSWERS_FLUSH_S)) as server:
        judge = http_judge(server, "stream", concurrency=8)
        items = [item(pair_id=i) for i in range(5)] + [item("SLOW", pair_id=5)]
        recorded: list[tuple[float, int]] = []
        started = time.monotonic()

        def record(answers) -> bool:
            recorded.append((time.monotonic() - started, len(answers[judge])))
            return True

        calls = judges_call(
            todo={judge: items}, calls_before={judge.pk: {}}, attempt=1, record=record
        )
    assert calls.retry == {}
    assert not calls.stopped
    assert sum(count for _, count in recorded) == 6
    # The fast five were written before the slow one was answered, not all at the end.
    first_at, first_count = recorded[0]
    assert first_count == 5
    assert first_at < 2 * ANSWERS_FLUSH_S
    assert recorded[-1][1] == 1


def test_an_answer_that_comes_in_while_more_work_is_pulled_is_recorded():
    with FakeOpenAI(verdict("1"), delay_s=0.1) as server:
        judge = http_judge(server, "pulled", concurrency=4)
        recorded: list[int] = []

        def nothing_more_after_the_answer_is_in():
            time.sleep(0.5)  # the call out is answered meanwhile
            return None

        calls = judges_call(
            todo={judge: [item(pair_id=1)]},
            calls_before={judge.pk: {}},
            attempt=1,
            record=lambda answers: recorded.extend(a["pair_id"] for a in answers[judge]) or True,
            more=nothing_more_after_the_answer_is_in,
        )
    assert calls.retry == {}
    assert recorded == [1]


def test_a_judge_answering_in_the_tasks_thread_has_its_verdicts_written_before_a_pull(
    monkeypatch,
):
    """A torch or offline judge judges a pulled batch before ``start`` returns: the answers
    already in are written first, not held for the whole next batch (a process killed during
    it would lose them, and a cancel would wait)."""
    from judges.runs.calls import Work
    from tests.judges.scripted import make_judges, use_scripted_judges

    use_scripted_judges(
        monkeypatch, {"inline": lambda _: JudgeResult(outcome="ok", preferred="first")}
    )
    (judge,) = make_judges("inline")
    recorded: list[int] = []
    seen_at_pull: list[list[int]] = []

    def more():
        seen_at_pull.append(list(recorded))
        if len(seen_at_pull) > 1:
            return None
        return Work(todo={judge: [item(pair_id=3), item(pair_id=4)]}, calls_before={judge.pk: {}})

    judges_call(
        todo={judge: [item(pair_id=1), item(pair_id=2)]},
        calls_before={judge.pk: {}},
        attempt=1,
        record=lambda answers: recorded.extend(a["pair_id"] for a in answers[judge]) or True,
        more=more,
    )
    assert seen_at_pull[0] == [1, 2]
    assert sorted(recorded) == [1, 2, 3, 4]


def test_a_recorder_that_says_stop_cancels_the_calls_still_out():
    with FakeOpenAI(slow_for("SLOW", 5.0)) as server:
        judge = http_judge(server, "stop", concurrency=8)
        items = [item(pair_id=0)] + [item("SLOW", pair_id=i) for i in range(1, 4)]
        started = time.monotonic()
        calls = judges_call(
            todo={judge: items}, calls_before={judge.pk: {}}, attempt=1, record=lambda a: False
        )
        elapsed = time.monotonic() - started
    assert calls.stopped
    assert elapsed < 4.0  # the slow calls were not waited for


def test_a_run_cancelled_while_its_batch_runs_writes_no_more(
    project, django_capture_on_commit_callbacks, monkeypatch
):
    with FakeOpenAI(slow_for("SLOW", 3.0)) as server:
        judge = http_judge(server, "cancelled", concurrency=8)
        fast = PairFactory(project=project, external_id="fast-1")
        slow = PairFactory(project=project, external_id="SLOW-1")
        run_ids: list[int] = []
        real_judges_call = runs.judges_call

        def cancelled_at_the_first_answers(*, record, **kwargs):
            def cancel_then_record(answers) -> bool:
                runs.filter_run_cancel(run=FilterRun.objects.get(pk=run_ids[0]))
                return record(answers)

            return real_judges_call(record=cancel_then_record, **kwargs)

        monkeypatch.setattr(runs, "judges_call", cancelled_at_the_first_answers)
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            run = runs.filter_run_create(project=project, judges=[judge])
        run_ids.append(run.pk)
        started = time.monotonic()
        for callback in callbacks:
            callback()
        elapsed = time.monotonic() - started
    run.refresh_from_db()
    assert run.status == FilterRun.Status.CANCELLED
    assert set(Verdict.objects.filter(run=run).values_list("pair_id", flat=True)) == {fast.pk}
    assert elapsed < 2.5  # the slow pair's calls were cancelled, not waited for
    slow.refresh_from_db()
    assert slow.status == PairStatus.IMPORTED


def test_a_batch_queued_in_the_one_judge_form_still_runs(project):
    judge = JudgeFactory(name="heuristic-old", kind="heuristic")
    pair = PairFactory(project=project, task="text")
    run = FilterRun.objects.create(project=project, number=1, status=FilterRun.Status.RUNNING)
    run.judges.set([judge])
    run.pairs.set([pair])
    tasks.filter_run_batch.run(
        run_id=run.pk, judge_id=judge.pk, items=[[pair.pk, "AB"], [pair.pk, "BA"]]
    )
    assert set(Verdict.objects.filter(run=run).values_list("order", flat=True)) == {"AB", "BA"}


def test_a_stopped_loop_starts_again_and_the_judge_connects_anew():
    with FakeOpenAI(verdict("1")) as server:
        backend = get_backend(http_judge(server, "restart", concurrency=2))
        try:
            (first,) = backend.judge_batch([item()])
            event_loop_stop()  # as a worker process does when it ends
            (second,) = backend.judge_batch([item()])
        finally:
            backend.close()
    assert (first.outcome, second.outcome) == ("ok", "ok")
    assert server.connections == 2  # the stopped loop's connection was not reused
