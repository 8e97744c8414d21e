"""Filter runs: every chosen judge votes on every pair of the run in both orders, as Celery
batches; when every (judge, pair, order) has a verdict, the ensemble decides each pair.

Work is keyed by (run, judge, pair, order), which the database keeps unique, so a batch may
run twice harmlessly, and "what is left to do" is always the keys without a verdict: starting,
resuming after a crash and re-delivered batches all enqueue exactly that. See docs/judges-runs.md.
"""

from __future__ import annotations

import json
import logging
import random
from collections import defaultdict
from dataclasses import dataclass
from itertools import zip_longest
from typing import cast

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max, Q
from django.db.models.functions import Coalesce
from django.forms.models import model_to_dict
from django.utils import timezone

from annotation.audit.services import audit_record
from annotation.core.jobs import BrokerUnavailable, StalledJobs, job_publish, stalled_before
from annotation.core.webhook_events import webhook_event_record
from annotation.decisions.lifecycle import (
    EnsembleOutcome,
    pairs_apply_ensemble,
    pairs_return_to_imported,
    pairs_start_judging,
)
from annotation.models import Pair, PairStatus, Project, WebhookEventKind
from judges import backends
from judges.backends.base import JudgeBackend, JudgeItem, JudgeResult, Order, judge_judgeable
from judges.ensemble import (
    DEFAULT_EASY_THRESHOLD,
    ORDERS,
    Decision,
    contested_first,
    default_min_votes,
    ensemble_decide,
    judge_stats,
)
from judges.models import FilterRun, Judge, Verdict
from judges.roster.services import disabled_judges_message
from judges.runs.selectors import ACTIVE, stalled_filter_runs, verdict_rows

logger = logging.getLogger(__name__)

Status = FilterRun.Status
# The tasks of a run (judges/tasks.py registers them by these names).
START_TASK = "judges.filter_run_start"
BATCH_TASK = "judges.filter_run_batch"
FINISH_TASK = "judges.filter_run_finish"
# Publishing a task tries the broker twice, briefly, so a request never hangs on a broker that
# is down (docs/judges-runs.md, "Broker down"): annotation.core.jobs.job_publish.


def check_run_options(
    *,
    judges: list[Judge],
    threshold: float,
    budget_per_task: int | None,
    min_valid_votes: int | None = None,
) -> None:
    """Raises ValidationError naming the field when the options cannot make a run."""
    errors = {}
    if not judges:
        errors["judges"] = "Choose at least one judge."
    elif (disabled := disabled_judges_message(judges)) is not None:
        errors["judges"] = disabled
    if not 0.5 < threshold <= 1:
        errors["threshold"] = f"The easy threshold must lie in (0.5, 1]; got {threshold}."
    if budget_per_task is not None and budget_per_task < 1:
        errors["budget_per_task"] = "The budget must be at least 1 pair per task (or none)."
    if min_valid_votes is not None:
        most = len(judges) * len(ORDERS)
        if min_valid_votes < 1:
            errors["min_valid_votes"] = "At least 1 valid vote (or blank for the default)."
        elif judges and min_valid_votes > most:
            errors["min_valid_votes"] = (
                f"At most {most}: {len(judges)} judge{'' if len(judges) == 1 else 's'} in both "
                f"orders give a pair no more valid votes; got {min_valid_votes}."
            )
    if errors:
        raise ValidationError(errors)


def filter_run_create(
    *,
    project: Project,
    judges,
    threshold: float = DEFAULT_EASY_THRESHOLD,
    budget_per_task: int | None = None,
    min_valid_votes: int | None = None,
    created_by=None,
    pair_ids=None,
) -> FilterRun:
    """Takes the project's imported pairs (or those of ``pair_ids`` still imported), moves them
    to "judging" and enqueues the run once the transaction commits. A pair is easy only with
    ``min_valid_votes`` valid votes; None: one per judge (``default_min_votes``).

    When the broker cannot take the start message, the run is failed and its pairs are
    imported again (after the commit, like the enqueue), and BrokerUnavailable says so."""
    run = _filter_run_insert(
        project=project,
        judges=list(judges),
        threshold=threshold,
        budget_per_task=budget_per_task,
        min_valid_votes=min_valid_votes,
        created_by=created_by,
        pair_ids=pair_ids,
    )

    def refused(exc: BrokerUnavailable) -> None:
        error = f"{exc} The run did not start; its pairs are imported again."
        with transaction.atomic():
            filter_run_fail(run_id=run.pk, error=error)
            pairs_return_to_imported(pair_ids=run.pairs.values_list("pk", flat=True))
        run.refresh_from_db()
        raise BrokerUnavailable(
            f"Filter run {run.number} failed: {error} Try again once the task queue is back."
        ) from exc

    job_publish(START_TASK, kwargs={"run_id": run.pk}, on_refused=refused)
    return run


@transaction.atomic
def _filter_run_insert(
    *, project, judges, threshold, budget_per_task, min_valid_votes, created_by, pair_ids
):
    check_run_options(
        judges=judges,
        threshold=threshold,
        budget_per_task=budget_per_task,
        min_valid_votes=min_valid_votes,
    )
    ids = pairs_start_judging(project=project, pair_ids=pair_ids)
    if not ids:
        raise ValidationError({"pairs": "The project has no imported pairs to judge."})
    # The project's row lock makes concurrent starts take numbers one after the other.
    Project.objects.select_for_update().filter(pk=project.pk).values_list("pk").get()
    last = project.filter_runs.aggregate(last=Max("number"))["last"] or 0
    run = FilterRun.objects.create(
        project=project,
        number=last + 1,
        threshold=threshold,
        budget_per_task=budget_per_task,
        min_valid_votes=(
            default_min_votes(len(judges)) if min_valid_votes is None else min_valid_votes
        ),
        created_by=created_by,
    )
    run.judges.set(judges)
    through = FilterRun.pairs.through
    through.objects.bulk_create(
        [through(filterrun_id=run.pk, pair_id=pk) for pk in ids], batch_size=2000
    )
    after = {
        "judges": sorted(judge.name for judge in judges),
        "threshold": threshold,
        "budget_per_task": budget_per_task,
        "min_valid_votes": run.min_valid_votes,
        "pairs": len(ids),
    }
    audit_record(
        actor=created_by, project=project, action="filter_run.created", target=run, after=after
    )
    return run


def filter_run_start(*, run_id: int) -> None:
    """Marks a pending run running and enqueues its batches. Safe to repeat: a re-delivered
    start enqueues only what still lacks a verdict."""
    FilterRun.objects.filter(pk=run_id, status=Status.PENDING).update(
        status=Status.RUNNING, started_at=timezone.now()
    )
    run = FilterRun.objects.filter(pk=run_id, status=Status.RUNNING).first()
    if run is not None:
        _enqueue_missing(run)


def filter_run_resume(*, run: FilterRun) -> int:
    """Re-enqueues every (judge, pair, order) of a pending, running or failed run that has no
    verdict yet, or finishes the run when none is missing; returns the items enqueued.

    Work already queued may then run twice, which the unique verdict key makes harmless. When
    the broker cannot take the messages, the run is left as it was and BrokerUnavailable says
    so."""
    fields = ("status", "error", "finished_at", "started_at", "resumed_at")
    before = FilterRun.objects.filter(pk=run.pk).values(*fields).get()
    judging = Pair.objects.filter(filter_runs=run, status=PairStatus.JUDGING)
    if before["status"] in (*ACTIVE, Status.FAILED) and not judging.exists():
        raise ValidationError(
            {"run": f"Run {run.number} has no pairs left to judge; start a new run on them."}
        )
    if (disabled := disabled_judges_message(run.judges.all())) is not None:
        raise ValidationError({"judges": disabled})
    now = timezone.now()
    FilterRun.objects.filter(pk=run.pk, status__in=[Status.PENDING, Status.FAILED]).update(
        status=Status.RUNNING, error="", finished_at=None, started_at=Coalesce("started_at", now)
    )
    run.refresh_from_db()
    if run.status != Status.RUNNING:
        raise ValidationError({"run": f"Run {run.number} is {run.status}; it cannot resume."})
    try:
        enqueued = _enqueue_missing(run)
        if not enqueued:
            job_publish(FINISH_TASK, kwargs={"run_id": run.pk}, after_commit=False)
    except BrokerUnavailable as exc:
        FilterRun.objects.filter(pk=run.pk, status=Status.RUNNING).update(**before)
        run.refresh_from_db()
        raise BrokerUnavailable(
            f"{exc} Run {run.number} was not resumed; try again later."
        ) from exc
    FilterRun.objects.filter(pk=run.pk).update(resumed_at=now)
    run.resumed_at = now
    return enqueued


class _StalledRuns(StalledJobs[FilterRun]):
    """Stalled runs (``stalled_filter_runs``) are resumed, each claimed by a conditional
    UPDATE of ``resumed_at`` first, so two beats never both resume it, and the resumed run
    has ``ARBITER_STALLED_AFTER_S`` to show progress again."""

    noun = "filter run"
    refusals = (ValidationError, BrokerUnavailable)

    def stalled(self):
        return stalled_filter_runs().order_by("pk")

    def claim(self, job):
        return (
            FilterRun.objects.filter(pk=job.pk, status__in=ACTIVE)
            .filter(Q(resumed_at__isnull=True) | Q(resumed_at__lt=stalled_before()))
            .update(resumed_at=timezone.now())
        )

    def recover(self, job):
        return filter_run_resume(run=job)  # the calls enqueued


STALLED_RUNS = _StalledRuns()


def filter_runs_resume_stalled() -> list[int]:
    """Resumes every stalled run (the periodic task); returns the ids resumed."""
    return STALLED_RUNS.sweep()


@transaction.atomic
def filter_run_cancel(*, run: FilterRun, actor=None) -> bool:
    """Stops an unfinished (or failed) run: batches still queued do nothing, its pairs go back
    to "imported". Verdicts already written are kept. False when the run had finished."""
    cancelled = FilterRun.objects.filter(pk=run.pk, status__in=[*ACTIVE, Status.FAILED]).update(
        status=Status.CANCELLED, finished_at=timezone.now()
    )
    before = run.status
    run.refresh_from_db()
    if cancelled:
        pairs_return_to_imported(pair_ids=run.pairs.values_list("pk", flat=True))
        audit_record(
            actor=actor,
            project=run.project,
            action="filter_run.cancelled",
            target=run,
            before={"status": before},
            after={"status": run.status},
        )
    return bool(cancelled)


def filter_run_fail(*, run_id: int, error: str) -> None:
    """Records an unexpected failure, so the run never hangs in "running"; it can resume."""
    FilterRun.objects.filter(pk=run_id, status__in=ACTIVE).update(
        status=Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def expected_verdicts(run: FilterRun) -> int:
    return run.pairs.count() * run.judges.count() * len(ORDERS)


def _missing_work(run: FilterRun) -> dict[Judge, list[list]]:
    pair_ids = sorted(run.pairs.values_list("pk", flat=True))
    done = set(Verdict.objects.filter(run=run).values_list("judge_id", "pair_id", "order"))
    missing = {}
    for judge in run.judges.order_by("name"):
        items = [
            [pk, order] for pk in pair_ids for order in ORDERS if (judge.pk, pk, order) not in done
        ]
        if items:
            missing[judge] = items
    return missing


def _enqueue_missing(run: FilterRun) -> int:
    """Enqueues the missing items in batches, judges interleaved so all progress together."""
    size = 2 * settings.ARBITER_JUDGE_BATCH_PAIRS
    per_judge = [
        [(judge, items[i : i + size]) for i in range(0, len(items), size)]
        for judge, items in _missing_work(run).items()
    ]
    enqueued = 0
    for round_ in zip_longest(*per_judge):
        for batch in round_:
            if batch is not None:
                judge, items = batch
                _enqueue_batch(run_id=run.pk, judge=judge, items=items)
                enqueued += len(items)
    return enqueued


def _enqueue_batch(
    *, run_id: int, judge: Judge, items: list[list], attempt: int = 1, countdown: float = 0
) -> None:
    job_publish(
        BATCH_TASK,
        kwargs={"run_id": run_id, "judge_id": judge.pk, "items": items, "attempt": attempt},
        queue=judge.queue,
        countdown=countdown or None,
        after_commit=False,
    )


def retry_countdown(attempt: int) -> float:
    """Seconds before retry ``attempt + 1``: exponential backoff with jitter, capped."""
    ceiling = min(
        settings.ARBITER_JUDGE_RETRY_CAP_MS,
        settings.ARBITER_JUDGE_RETRY_BASE_MS * 2 ** (attempt - 1),
    )
    return random.uniform(ceiling / 2, ceiling) / 1000


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


@dataclass
class BatchCalls:
    """What one batch of calls gave: answers to record (fields for ``Answer``) and the items
    to retry later (``[pair_id, order, calls so far]``), with the countdown before they may."""

    answers: list[dict]
    retry: list[list]
    countdown: float


def judge_batch_call(
    *, judge: Judge, todo: list[JudgeItem], calls_before: dict, attempt: int
) -> BatchCalls:
    """Calls ``judge``'s backend once on ``todo``; results that failed transiently are to be
    retried until ``ARBITER_JUDGE_MAX_ATTEMPTS``, the rest are recorded. Filter runs and
    evaluations both judge through this (docs/judges-runs.md, "How a run executes")."""
    backend = _backend_for(judge)
    try:
        results = judge_judgeable(backend, todo)
    except BaseException:
        judge_backends_close(judge_id=judge.pk)  # its state is unknown: start afresh
        raise
    if len(results) != len(todo):
        raise RuntimeError(
            f"Judge {judge.name} returned {len(results)} results for {len(todo)} items"
        )
    answers, retry = [], []
    for item, result in zip(todo, results, strict=True):
        calls = calls_before.get((item.pair_id, item.order), 0) + (result.attempts or 1)
        retryable = result.outcome == Verdict.Outcome.ERROR and result.transient
        if retryable and attempt < settings.ARBITER_JUDGE_MAX_ATTEMPTS:
            retry.append([item.pair_id, item.order, calls])
        else:
            answers.append(answer_fields(item, result, calls))
    return BatchCalls(answers, retry, retry_countdown(attempt) if retry else 0.0)


def batch_calls_before(items: list) -> dict[tuple[int, Order], int]:
    """A batch's items (``[pair_id, order]``, or ``[pair_id, order, calls so far]`` when
    retried) as (pair_id, order) -> calls made so far."""
    return {
        (int(item[0]), cast(Order, str(item[1]))): int(item[2]) if len(item) > 2 else 0
        for item in items
    }


def filter_run_judge_batch(*, run_id: int, judge_id: int, items: list, attempt: int = 1) -> None:
    """Judges the batch's items (``[pair_id, order]``, or ``[pair_id, order, calls so far]``
    when retried) that still lack a verdict and writes them; items that failed transiently go
    back to the queue later, with backoff, until ``ARBITER_JUDGE_MAX_ATTEMPTS``."""
    run = FilterRun.objects.select_related("project").filter(pk=run_id).first()
    judge = Judge.objects.filter(pk=judge_id).first()
    if run is None or judge is None or run.status != Status.RUNNING:
        return
    if (disabled := disabled_judges_message([judge])) is not None:
        # Disabled while its batches waited: never called; enabling it lets the run resume.
        filter_run_fail(run_id=run.pk, error=f"{disabled} Enable it and resume the run.")
        return
    calls_before = batch_calls_before(items)
    pair_ids = {pk for pk, _ in calls_before}
    done = set(
        Verdict.objects.filter(run=run, judge=judge, pair_id__in=pair_ids).values_list(
            "pair_id", "order"
        )
    )
    pairs = (
        Pair.objects.filter(pk__in=pair_ids, filter_runs=run)
        .select_related("prompt", "response_a", "response_b")
        .in_bulk()
    )
    todo = [
        judge_item(pairs[pk], order, allow_tie=run.project.has_tie)
        for pk, order in calls_before
        if (pk, order) not in done and pk in pairs
    ]
    if todo:
        calls = judge_batch_call(judge=judge, todo=todo, calls_before=calls_before, attempt=attempt)
        Verdict.objects.bulk_create(
            [Verdict(run_id=run.pk, judge_id=judge.pk, **fields) for fields in calls.answers],
            ignore_conflicts=True,
        )
        if calls.retry:
            _enqueue_batch(
                run_id=run.pk,
                judge=judge,
                items=calls.retry,
                attempt=attempt + 1,
                countdown=calls.countdown,
            )
            return
    filter_run_finish_if_complete(run_id=run.pk)


# One backend per judge per worker process, so a reward model loads once rather than per batch.
_backends: dict[int, tuple[str, JudgeBackend]] = {}


def _backend_for(judge: Judge) -> JudgeBackend:
    """The judge's backend, built again when the judge's settings changed."""
    fingerprint = json.dumps(model_to_dict(judge), sort_keys=True, default=str)
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


def filter_run_finish_if_complete(*, run_id: int) -> bool:
    """Finishes the run when every (judge, pair, order) has a verdict; True if this call did."""
    run = FilterRun.objects.filter(pk=run_id, status=Status.RUNNING).first()
    if run is None or Verdict.objects.filter(run=run).count() < expected_verdicts(run):
        return False
    return filter_run_finish(run=run)


def _route(run: FilterRun, decisions: dict[int, Decision], tasks: dict[int, str]) -> dict:
    """Each pair's new status: easy pairs are filtered out; with a budget, only the N most
    contested other pairs per task are queued and the rest return to "imported"."""
    status = {}
    contested: defaultdict[str, dict[int, Decision]] = defaultdict(dict)
    for pk, decision in decisions.items():
        if decision.easy:
            status[pk] = PairStatus.EASY
        else:
            contested[tasks[pk]][pk] = decision
    for per_task in contested.values():
        for rank, pk in enumerate(contested_first(per_task)):
            within = run.budget_per_task is None or rank < run.budget_per_task
            status[pk] = PairStatus.QUEUED if within else PairStatus.IMPORTED
    return status


@transaction.atomic
def filter_run_finish(*, run: FilterRun) -> bool:
    """Applies the ensemble to every pair of the run; the pairs still "judging" take their
    outcome (through annotation's pair services). Exactly one caller wins: the conditional
    UPDATE running -> succeeded changes one row for the first and none for any later (or
    concurrent) caller."""
    won = FilterRun.objects.filter(pk=run.pk, status=Status.RUNNING).update(
        status=Status.SUCCEEDED, finished_at=timezone.now()
    )
    if not won:
        return False
    run.refresh_from_db()
    names = dict(run.judges.values_list("pk", "name"))
    rows = verdict_rows(run)
    votes = defaultdict(list)
    # pair -> judge name -> order -> the side, or the outcome of a call that gave none
    per_judge: defaultdict[int, defaultdict[str, dict[str, str]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for row in rows:
        votes[row.pair_id].append(row.side if row.outcome == Verdict.Outcome.OK else None)
        per_judge[row.pair_id][names.get(row.judge_id, str(row.judge_id))][row.order] = (
            row.side or row.outcome
        )
    task_of = dict(Pair.objects.filter(filter_runs=run).values_list("pk", "task"))
    decisions = {
        pk: ensemble_decide(votes[pk], threshold=run.threshold, min_votes=run.min_valid_votes)
        for pk in task_of
    }
    routes = _route(run, decisions, task_of)
    counts = pairs_apply_ensemble(
        outcomes=[
            EnsembleOutcome(
                pair_id=pk,
                status=routes[pk],
                label=decision.label,
                agreement=decision.agreement,
                summary={
                    "run": run.pk,
                    "threshold": run.threshold,
                    "min_valid_votes": run.min_valid_votes,
                    "votes": decision.votes,
                    "invalid": decision.invalid,
                    "judges": per_judge[pk],
                },
            )
            for pk, decision in decisions.items()
        ]
    )
    stats = judge_stats(rows, decisions)
    run.summary = {
        "pairs": len(task_of),
        "easy": counts[PairStatus.EASY],
        "queued": counts[PairStatus.QUEUED],
        "returned": counts[PairStatus.IMPORTED],
        "no_votes": sum(1 for d in decisions.values() if not d.valid),
        # One side held the share, but with fewer valid votes than the run's minimum.
        "too_few_votes": sum(1 for d in decisions.values() if d.too_few_votes),
        "judges": {names[pk]: stats.get(pk, {}) for pk in names},
    }
    run.save(update_fields=["summary"])
    project = Project.objects.get(pk=run.project_id)
    counts_only = {key: value for key, value in run.summary.items() if key != "judges"}
    run_data = {"id": run.pk, "number": run.number, "summary": counts_only}
    data = {"project": project.slug, "filter_run": run_data}
    webhook_event_record(project=project, kind=WebhookEventKind.FILTER_RUN_FINISHED, data=data)
    return True
