"""A batch task pulls its run's next batches while its judges have free slots
(docs/judges-runs.md, "How a run executes"): slots stay full from batch to batch, each batch
is judged by the one task that claimed it, a task delivered again after its process died takes
back what it claimed, and tasks running at once never claim the same batch."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from judges.backends.base import JudgeResult
from judges.models import FilterRun, FilterRunBatch, Verdict
from judges.runs import batches
from judges.runs import services as runs
from tests.factories import FilterRunFactory, JudgeFactory, PairFactory
from tests.judges.fake_openai import FakeOpenAI, by_marker
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    make_judges,
    use_scripted_judges,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]


def http_judge(server: FakeOpenAI, concurrency: int):
    return JudgeFactory(
        name="pulling",
        kind="openai",
        base_url=server.base_url,
        model="m",
        concurrency=concurrency,
        timeout_s=10,
    )


def queued_run(monkeypatch, project, judges) -> tuple[FilterRun, list[dict]]:
    """A running run whose batches are queued but not yet delivered: their messages."""
    sent: list[dict] = []
    monkeypatch.setattr(runs, "_enqueue_batch", lambda **message: sent.append(message))
    run = runs.filter_run_create(project=project, judges=judges)
    run.refresh_from_db()
    if run.status == FilterRun.Status.PENDING:  # inside the test's transaction: not yet sent
        runs.filter_run_start(run_id=run.pk)
        run.refresh_from_db()
    return run, sent


def deliver(message: dict, owner: str) -> None:
    """The message's task, with ``owner`` as its task id."""
    runs.filter_run_judge_batch(
        run_id=message["run_id"],
        work=message["work"],
        batch_id=message["batch_id"],
        owner=owner,
    )


def keys(run: FilterRun) -> list[tuple[int, str]]:
    return sorted(Verdict.objects.filter(run=run).values_list("pair_id", "order"))


def test_a_batch_pulls_the_next_ones_so_its_judges_slots_stay_full(
    settings, project, django_capture_on_commit_callbacks
):
    settings.ARBITER_JUDGE_BATCH_PAIRS = 1  # 2 calls a batch, a judge of 4 slots
    with FakeOpenAI(by_marker("GOOD"), delay_s=0.2) as server:
        judge = http_judge(server, concurrency=4)
        PairFactory.create_batch(8, project=project, task="text")
        with django_capture_on_commit_callbacks(execute=True):
            run = runs.filter_run_create(project=project, judges=[judge])
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    # Batches run one after the other (eagerly here, as one worker process does), yet the
    # judge's 4 slots were full: the first batch's task pulled the others.
    assert server.max_in_flight == 4
    assert server.request_count == 8 * 2  # no call made twice
    assert not FilterRunBatch.objects.filter(run=run).exists()  # the finished run's rows go


def test_a_batch_another_task_claimed_is_not_judged_twice(monkeypatch, settings, project):
    settings.ARBITER_JUDGE_BATCH_PAIRS = 1
    monkeypatch.setattr(runs, "PULL_FOR_S", 0)  # each task judges its own batch only
    calls = use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    pairs = PairFactory.create_batch(2, project=project)
    run, sent = queued_run(monkeypatch, project, make_judges("j1"))
    assert len(sent) == 2

    deliver(sent[0], owner="task-1")
    assert len(calls) == 2
    deliver(sent[0], owner="task-2")  # the message again, as another task
    deliver(sent[0], owner="task-1")  # and delivered again to the task that judged it
    assert len(calls) == 2
    assert keys(run) == sorted((pairs[0].pk, order) for order in ("AB", "BA"))
    deliver(sent[1], owner="task-3")
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    assert len(calls) == 4
    assert len(keys(run)) == 4


def test_a_task_delivered_again_after_its_process_died_takes_back_what_it_claimed(
    monkeypatch, settings, project
):
    settings.ARBITER_JUDGE_BATCH_PAIRS = 1
    calls = use_scripted_judges(monkeypatch, {"j1": canonical("A")})
    (judge,) = make_judges("j1")
    pairs = PairFactory.create_batch(3, project=project)
    run, sent = queued_run(monkeypatch, project, [judge])
    first, second, _third = sent
    # task-1 took the first batch, pulled the second, wrote one answer and was killed.
    FilterRunBatch.objects.filter(pk__in=[first["batch_id"], second["batch_id"]]).update(
        owner="task-1"
    )
    Verdict.objects.create(run=run, judge=judge, pair=pairs[0], order="AB", outcome="ok", side="A")

    deliver(second, owner="task-2")  # held by task-1: task-2 pulls the third instead
    assert sorted((c[1].pair_id, c[1].order) for c in calls) == [
        (pairs[2].pk, "AB"),
        (pairs[2].pk, "BA"),
    ]
    run.refresh_from_db()
    assert run.status == FilterRun.Status.RUNNING

    deliver(first, owner="task-1")  # the broker gives the killed task's message back
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    assert len(calls) == 5  # the answer written before the kill was not asked again
    assert keys(run) == sorted((pair.pk, order) for pair in pairs for order in ("AB", "BA"))


def test_a_task_that_pulled_several_batches_retries_in_batches_of_the_usual_size(
    monkeypatch, settings, project
):
    settings.ARBITER_JUDGE_BATCH_PAIRS = 1
    busy = JudgeResult(outcome="error", error="HTTP 429", transient=True)
    use_scripted_judges(monkeypatch, {"j1": lambda item: busy})
    pairs = PairFactory.create_batch(3, project=project)
    run, sent = queued_run(monkeypatch, project, make_judges("j1"))
    deliver(sent[0], owner="task-1")  # judges all three batches: every call answers 429
    retries = sent[3:]
    assert [message["attempt"] for message in retries] == [2, 2, 2]
    assert sorted(len(items) for message in retries for _, items in message["work"]) == [2] * 3
    retried = {(item[0], item[1]) for m in retries for _, items in m["work"] for item in items}
    assert retried == {(pair.pk, order) for pair in pairs for order in ("AB", "BA")}
    assert not Verdict.objects.filter(run=run).exists()


@pytest.mark.django_db(transaction=True)  # each thread's own connection sees the rows
def test_tasks_running_at_once_never_claim_the_same_batch(monkeypatch, settings, project):
    settings.ARBITER_JUDGE_BATCH_PAIRS = 1
    PairFactory.create_batch(12, project=project, task="text")
    with FakeOpenAI(by_marker("GOOD"), delay_s=0.02) as server:
        judge = http_judge(server, concurrency=2)
        run, sent = queued_run(monkeypatch, project, [judge])
        errors: list[BaseException] = []

        def task(message: dict, owner: str) -> None:
            try:
                deliver(message, owner)
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=task, args=(sent[n], f"task-{n}")) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED
    assert server.request_count == 12 * 2  # every batch judged by one task only
    assert len(keys(run)) == 12 * 2


def test_verdicts_of_mixed_number_types_are_written_as_bulk_create_wrote_them(project):
    """One INSERT from arrays: psycopg refuses an array of mixed types, so each number column
    is made one type first (a backend's confidence ``1`` beside ``0.5``), and a text too long
    for its column is refused, not cut by the array's cast."""
    from django.db import DataError, transaction

    judge = JudgeFactory(name="mixed")
    pair = PairFactory(project=project)
    run = FilterRunFactory(project=project, status=FilterRun.Status.RUNNING)

    def fields(order: str, confidence, tokens) -> dict:
        return {
            "pair_id": pair.pk, "order": order, "outcome": "ok", "side": "A",
            "confidence": confidence, "reasoning": "", "raw": "", "error": "", "attempts": 1,
            "latency_ms": 12, "prompt_tokens": tokens, "completion_tokens": None,
        }  # fmt: skip

    batches.verdicts_write(
        run_id=run.pk, answers={judge: [fields("AB", 1, 10), fields("BA", 0.5, 7.0)]}
    )
    written = dict(Verdict.objects.filter(run=run).values_list("order", "confidence"))
    assert written == {"AB": 1.0, "BA": 0.5}
    assert sorted(Verdict.objects.filter(run=run).values_list("prompt_tokens", flat=True)) == [
        7,
        10,
    ]
    other = PairFactory(project=project)
    too_long = {**fields("ABC", 0.5, None), "pair_id": other.pk}
    with pytest.raises(DataError), transaction.atomic():
        batches.verdicts_write(run_id=run.pk, answers={judge: [too_long]})
    assert not Verdict.objects.filter(pair=other).exists()


def test_a_token_count_of_true_is_no_count():
    from judges.backends.openai import _count

    assert _count(True) is None
    assert _count(12) == 12


def test_a_failed_run_keeps_no_batch_rows(monkeypatch, project):
    (judge,) = make_judges("failing")
    PairFactory.create_batch(3, project=project, task="text")
    run, sent = queued_run(monkeypatch, project, [judge])
    assert FilterRunBatch.objects.filter(run=run).count() == len(sent) > 0
    runs.filter_run_fail(run_id=run.pk, error="the worker died")
    run.refresh_from_db()
    assert run.status == FilterRun.Status.FAILED
    assert not FilterRunBatch.objects.filter(run=run).exists()
