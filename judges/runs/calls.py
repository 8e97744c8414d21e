"""How a batch calls its judges, shared by filter runs and evaluations: the items as a judge
sees them, every judge's calls started at once on its backend (one per judge per process,
kept from batch to batch), the answers handed over as they come in, in canonical terms
(docs/judges-runs.md, "How a run executes")."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import cast

from django.conf import settings
from django.forms.models import model_to_dict

from annotation.models import Pair
from judges import backends
from judges.backends.base import (
    JudgeBackend,
    JudgeItem,
    JudgeResult,
    Order,
    judge_judgeable_submit,
)
from judges.models import Judge, Verdict


def judge_item(pair: Pair, order: Order, *, allow_tie: bool) -> JudgeItem:
    """The pair as one judge call sees it: ``first`` is the response shown first."""
    first, second = (pair.response_a, pair.response_b)
    if order == "BA":
        first, second = second, first
    return JudgeItem(
        pair_id=pair.pk,
        order=order,
        task=pair.task,
        prompt=pair.prompt.content,
        first=first.content,
        second=second.content,
        criterion=pair.criterion,
        allow_tie=allow_tie,
        metadata=pair.metadata,
    )


def answer_fields(item: JudgeItem, result: JudgeResult, calls: int) -> dict:
    """What a backend's result records, in canonical terms: the fields of ``Answer`` that a
    filter run's verdict and an evaluation's judgement share."""
    outcome: str = result.outcome  # a Verdict.Outcome below when the result is no vote
    side, error = "", result.error
    if outcome == Verdict.Outcome.OK:
        if result.preferred in ("first", "second", "tie"):
            side = item.canonical_side(result.preferred)
        else:
            outcome, error = Verdict.Outcome.UNPARSEABLE, "The judge named no preference."
    elif outcome not in Verdict.Outcome.values:
        outcome, error = Verdict.Outcome.ERROR, f"Unknown outcome {result.outcome!r}. {error}"
    return {
        "pair_id": item.pair_id,
        "order": item.order,
        "outcome": outcome,
        "side": side,
        "confidence": result.confidence if side else None,
        "reasoning": result.reasoning,
        "raw": result.raw,
        "error": error[:2000],
        "attempts": calls,
        "latency_ms": result.latency_ms,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
    }


def batch_calls_before(items: list) -> dict[tuple[int, Order], int]:
    """A batch's items (``[pair_id, order]``, or ``[pair_id, order, calls so far]`` when
    retried) as (pair_id, order) -> calls made so far."""
    return {
        (int(item[0]), cast(Order, str(item[1]))): int(item[2]) if len(item) > 2 else 0
        for item in items
    }


# A batch writes its answers as they come in, every ANSWERS_FLUSH_S seconds (and at its end),
# so a batch killed midway loses little and its run's progress moves while it runs.
ANSWERS_FLUSH_S = 0.5

# A batch that may pull more work asks for it once fewer calls than this many rounds of its
# judges' slots (their ``concurrency`` together) are left, so the next work is built and
# started before the slots go idle (docs/judges-runs.md, "How a run executes").
PULL_AHEAD_ROUNDS = 2

# Records answers, per judge fields for ``Answer``; returns False when the job stopped
# meanwhile (cancelled): the calls still out are then cancelled.
Recorder = Callable[[dict[Judge, list[dict]]], bool]


@dataclass
class Work:
    """Calls to make: per judge, the items; per judge id, calls made so far per item."""

    todo: dict[Judge, list[JudgeItem]]
    calls_before: dict[int, dict[tuple[int, Order], int]]


# Pulls more work for a batch whose calls are running low: None when there is no more.
Feeder = Callable[[], Work | None]


@dataclass
class BatchCalls:
    """What a batch's calls left to do: per judge, the items to retry later (``[pair_id,
    order, calls so far]``); ``stopped`` when the recorder stopped the batch."""

    retry: dict[Judge, list[list]]
    stopped: bool = False


def judges_call(
    *,
    todo: dict[Judge, list[JudgeItem]],
    calls_before: dict[int, dict[tuple[int, Order], int]],
    attempt: int,
    record: Recorder,
    more: Feeder | None = None,
) -> BatchCalls:
    """Starts every judge's calls at once (each backend bounds its own calls in flight) and
    hands the answers to ``record`` as they come in; results that failed transiently are to
    be retried until ``ARBITER_JUDGE_MAX_ATTEMPTS``. ``calls_before``: per judge id, calls
    made so far per item. ``more``, when given, is asked for further work whenever fewer
    than ``PULL_AHEAD_ROUNDS`` rounds of calls are left, until it has none. Filter runs and
    evaluations both judge through this (docs/judges-runs.md, "How a run executes")."""
    calls = _InFlight()
    try:
        calls.start(Work(todo, calls_before))
        return _collect(calls, attempt=attempt, record=record, more=more)
    except BaseException:
        calls.cancel()
        for judge in calls.judges:  # a call that raised, or a time limit: start afresh
            judge_backends_close(judge_id=judge.pk)
        raise


class _InFlight:
    """A batch's calls, their answers handed from the event loop's thread to the task's as
    they come in; ``wake`` is set once no more than ``low`` calls are out. ``of`` holds the
    calls whose answers the task has not taken yet (only the task's thread changes it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.of: dict[Future[JudgeResult], tuple[Judge, JudgeItem]] = {}
        self.answered: list[Future[JudgeResult]] = []
        self.out = 0
        self.low = 0
        self.judges: set[Judge] = set()
        self.calls_before: dict[int, dict[tuple[int, Order], int]] = {}

    def start(self, work: Work) -> None:
        for pk, before in work.calls_before.items():
            self.calls_before.setdefault(pk, {}).update(before)
        for judge, items in work.todo.items():
            self.judges.add(judge)
            submitted = judge_judgeable_submit(_backend_for(judge), items)
            with self.lock:
                self.of.update(zip(submitted, ((judge, item) for item in items), strict=True))
                self.out += len(submitted)
            for future in submitted:  # outside the lock: a future already done calls at once
                future.add_done_callback(self._answer)

    def _answer(self, future: Future[JudgeResult]) -> None:
        with self.lock:
            self.answered.append(future)
            self.out -= 1
            if self.out <= self.low:
                self.wake.set()

    def set_low(self, low: int) -> None:
        with self.lock:
            self.low = low
            if self.out <= low:
                self.wake.set()

    def take(self, timeout: float) -> list[tuple[Judge, JudgeItem, JudgeResult]]:
        """The answers in, waiting up to ``timeout`` for ``wake``."""
        self.wake.wait(timeout)
        with self.lock:
            answered, self.answered = self.answered, []
            if self.out > self.low:
                self.wake.clear()
        return [(*self.of.pop(future), future.result()) for future in answered]

    def cancel(self) -> None:
        for future in list(self.of):
            future.cancel()


def _collect(calls: _InFlight, *, attempt: int, record: Recorder, more: Feeder | None):
    """Waits for the calls, recording the answers in every ``ANSWERS_FLUSH_S`` and pulling
    more work from ``more`` while the calls out run low."""
    retry: defaultdict[Judge, list[list]] = defaultdict(list)
    answers: defaultdict[Judge, list[dict]] = defaultdict(list)

    def pull_ahead() -> int:
        return 0 if more is None else PULL_AHEAD_ROUNDS * sum(j.concurrency for j in calls.judges)

    calls.set_low(pull_ahead())
    flush_at = time.monotonic() + ANSWERS_FLUSH_S
    while True:
        for judge, item, result in calls.take(max(0.0, flush_at - time.monotonic())):
            before = calls.calls_before.get(judge.pk, {}).get((item.pair_id, item.order), 0)
            calls_made = before + (result.attempts or 1)
            retryable = result.outcome == Verdict.Outcome.ERROR and result.transient
            if retryable and attempt < settings.ARBITER_JUDGE_MAX_ATTEMPTS:
                retry[judge].append([item.pair_id, item.order, calls_made])
            else:
                answers[judge].append(answer_fields(item, result, calls_made))
        if more is not None and calls.out <= calls.low:
            # What is in is written first: a judge that answers in this thread (torch,
            # offline) judges the pulled batch before ``start`` returns, and this batch's
            # verdicts, and the check for a cancelled run, would wait for all of it.
            if answers:
                going = record(dict(answers))
                answers.clear()
                if not going:
                    calls.cancel()
                    return BatchCalls({}, stopped=True)
            work = more()
            if work is None:
                more = None
            else:
                calls.start(work)
            calls.set_low(pull_ahead())
        # Every call started was answered and taken: an answer counted off ``out`` may still
        # wait in ``answered`` for the next ``take``.
        finished = not calls.of and more is None
        if answers and (finished or time.monotonic() >= flush_at):
            going = record(dict(answers))
            answers.clear()
            if not going:
                calls.cancel()
                return BatchCalls({}, stopped=True)
        if time.monotonic() >= flush_at:
            flush_at = time.monotonic() + ANSWERS_FLUSH_S
        if finished:
            return BatchCalls(dict(retry))


# One backend per judge per worker process, so a reward model loads once rather than per batch.
_backends: dict[int, tuple[str, JudgeBackend]] = {}


def _backend_for(judge: Judge) -> JudgeBackend:
    """The judge's backend, built again when the judge's settings changed (its own fields:
    which projects may use it changes nothing in the backend, and costs a query to read)."""
    fields = [field.name for field in judge._meta.concrete_fields]
    fingerprint = json.dumps(model_to_dict(judge, fields=fields), sort_keys=True, default=str)
    cached = _backends.get(judge.pk)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    judge_backends_close(judge_id=judge.pk)
    backend = backends.get_backend(judge)
    _backends[judge.pk] = (fingerprint, backend)
    return backend


def judge_backends_close(*, judge_id: int | None = None) -> None:
    """Closes this process's backends (one judge's, or all when a worker process ends)."""
    for pk in [judge_id] if judge_id is not None else list(_backends):
        cached = _backends.pop(pk, None)
        if cached is not None:
            cached[1].close()
