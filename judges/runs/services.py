"""Filter runs: every chosen judge votes on every pair of the run in both orders, as Celery
batches; when every (judge, pair, order) has a verdict, the ensemble decides each pair.

Work is keyed by (run, judge, pair, order), which the database keeps unique, so a batch may
run twice harmlessly, and "what is left to do" is always the keys without a verdict: starting,
resuming after a crash and re-delivered batches all enqueue exactly that. See docs/judges-runs.md.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections import defaultdict
from itertools import zip_longest

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max, Q
from django.db.models.functions import Coalesce
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
from judges.backends.base import JudgeItem, Order
from judges.ensemble import (
    DEFAULT_EASY_THRESHOLD,
    ORDERS,
    Decision,
    contested_first,
    default_min_votes,
    ensemble_decide,
    judge_stats,
)
from judges.models import FilterRun, FilterRunBatch, Judge, Verdict
from judges.roster.services import disabled_judges_message
from judges.runs.batches import batch_claim, batch_feeder, batch_queue, verdicts_write
from judges.runs.calls import Work, batch_calls_before, judge_item, judges_call
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
        FilterRunBatch.objects.filter(run=run).delete()
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
    failed = FilterRun.objects.filter(pk=run_id, status__in=ACTIVE).update(
        status=Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )
    if failed:  # its batches' rows go, as a finished run's do; resuming makes them anew
        FilterRunBatch.objects.filter(run_id=run_id).delete()


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


def _batches(work: dict[Judge, list]) -> list[tuple[str, list]]:
    """``work`` (per judge, its items) cut into batches: each holds the next slice of
    ``ARBITER_JUDGE_BATCH_PAIRS`` pairs x 2 orders of every judge of one queue, as
    (queue, ``[[judge_id, items], ...]``)."""
    size = 2 * settings.ARBITER_JUDGE_BATCH_PAIRS
    by_queue: defaultdict[str, list[list[tuple[Judge, list]]]] = defaultdict(list)
    for judge, items in work.items():
        by_queue[judge.queue].append(
            [(judge, items[i : i + size]) for i in range(0, len(items), size)]
        )
    return [
        (queue, [[judge.pk, items] for judge, items in filter(None, round_)])
        for queue, per_judge in by_queue.items()
        for round_ in zip_longest(*per_judge)
    ]


def _enqueue_missing(run: FilterRun) -> int:
    """Enqueues the missing items in batches (``_batches``), so a worker process keeps every
    judge of a queue busy at once (each bounded by its own concurrency). Each batch is also a
    row (``FilterRunBatch``) that a task claims before it judges it, so a task with free
    slots can pull the next one; rows no task claimed, from an earlier start or resume, give
    way to these."""
    FilterRunBatch.objects.filter(run=run, owner="").delete()
    batches = FilterRunBatch.objects.bulk_create(
        FilterRunBatch(run=run, queue=queue, work=work)
        for queue, work in _batches(_missing_work(run))
    )
    for batch in batches:
        _enqueue_batch(run_id=run.pk, queue=batch.queue, work=batch.work, batch_id=batch.pk)
    return sum(len(items) for batch in batches for _, items in batch.work)


def _enqueue_batch(
    *,
    run_id: int,
    queue: str,
    work: list,
    attempt: int = 1,
    countdown: float = 0,
    batch_id: int | None = None,
) -> None:
    """``work``: ``[[judge_id, items], ...]``, judges that share ``queue``; ``batch_id``: its
    row, claimed before it is judged (a retry's work has none)."""
    kwargs = {"run_id": run_id, "work": work, "attempt": attempt}
    if batch_id is not None:
        kwargs["batch_id"] = batch_id
    job_publish(
        BATCH_TASK,
        kwargs=kwargs,
        queue=queue,
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


# A batch task pulls the run's next unclaimed batch while its judges have free slots for
# at most this long (half its time limit when that is shorter), then finishes what it holds:
# a task stays well inside its time limit and the broker's visibility timeout, and the
# batches left go to whichever process takes their messages.
PULL_FOR_S = 30


def filter_run_judge_batch(
    *,
    run_id: int,
    work: list,
    attempt: int = 1,
    batch_id: int | None = None,
    owner: str | None = None,
) -> None:
    """Judges the batch's items that still lack a verdict, every judge's at once, and writes
    the verdicts as they come in. ``work``: ``[[judge_id, items], ...]``, items ``[pair_id,
    order]`` (``[pair_id, order, calls so far]`` when retried). Items that failed transiently
    go back to the queue later, with backoff, until ``ARBITER_JUDGE_MAX_ATTEMPTS``.

    ``batch_id``: the batch's row, which this task claims as ``owner`` (its task id) unless
    another task claimed it; a task delivered again also takes back what ``owner`` holds.
    A first attempt then pulls the run's next unclaimed batches of its queue while its judges
    have free slots, for ``PULL_FOR_S``."""
    started = time.monotonic()
    run = FilterRun.objects.select_related("project").filter(pk=run_id).first()
    if run is None or run.status != Status.RUNNING:
        return
    owner = owner or uuid.uuid4().hex
    queue = batch_queue(work) if attempt == 1 else None
    if batch_id is not None:
        work = batch_claim(run=run, batch_id=batch_id, owner=owner, work=work)
    first = _batch_work(run, work)
    if first is None:  # a judge was disabled: the run failed
        return
    pull = None
    if queue is not None:
        soft_limit, _ = settings.ARBITER_TASK_TIME_LIMITS["filter run"]
        until = started + min(PULL_FOR_S, soft_limit / 2)
        pull = batch_feeder(run=run, queue=queue, owner=owner, until=until, build=_batch_work)
    if first.todo or pull is not None:

        def record(answers: dict[Judge, list[dict]]) -> bool:
            verdicts_write(run_id=run.pk, answers=answers)
            return FilterRun.objects.filter(pk=run.pk, status=Status.RUNNING).exists()

        calls = judges_call(
            todo=first.todo,
            calls_before=first.calls_before,
            attempt=attempt,
            record=record,
            more=pull,
        )
        if calls.stopped:
            return
        if calls.retry:
            # In batches of the usual size: a task that pulled many leaves its retries to
            # as many processes as the first attempt had.
            countdown = retry_countdown(attempt)
            for queue, retry in _batches(calls.retry):
                _enqueue_batch(
                    run_id=run.pk,
                    queue=queue,
                    work=retry,
                    attempt=attempt + 1,
                    countdown=countdown,
                )
            return
    filter_run_finish_if_complete(run_id=run.pk)


def _batch_work(run: FilterRun, work: list) -> Work | None:
    """The calls ``work`` still needs: each item without a verdict for (run, judge), each
    (pair, order) built once for all its judges. None when a judge was disabled while the
    batch waited: it is never called, and the run fails saying so (enabling it lets the run
    resume)."""
    found = Judge.objects.in_bulk([judge_id for judge_id, _ in work])
    judges: defaultdict[Judge, list] = defaultdict(list)
    for judge_id, items in work:
        if judge_id in found:
            judges[found[judge_id]] += items
    if (disabled := disabled_judges_message(list(judges))) is not None:
        filter_run_fail(run_id=run.pk, error=f"{disabled} Enable it and resume the run.")
        return None
    calls_before = {judge.pk: batch_calls_before(items) for judge, items in judges.items()}
    pair_ids = {pk for before in calls_before.values() for pk, _ in before}
    done = set(
        Verdict.objects.filter(run=run, judge__in=list(judges), pair_id__in=pair_ids).values_list(
            "judge_id", "pair_id", "order"
        )
    )
    pairs = (
        Pair.objects.filter(pk__in=pair_ids, filter_runs=run)
        .select_related("prompt", "response_a", "response_b")
        .in_bulk()
    )
    shown: dict[tuple[int, Order], JudgeItem] = {}  # one item per pair and order, all judges
    todo: dict[Judge, list[JudgeItem]] = {}
    for judge in judges:
        keys = [
            (pk, order)
            for pk, order in calls_before[judge.pk]
            if (judge.pk, pk, order) not in done and pk in pairs
        ]
        for pk, order in keys:
            if (pk, order) not in shown:
                shown[pk, order] = judge_item(pairs[pk], order, allow_tie=run.project.has_tie)
        if keys:
            todo[judge] = [shown[key] for key in keys]
    return Work(todo, calls_before)


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
    FilterRunBatch.objects.filter(run=run).delete()
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
