"""Judge evaluations: a judge scored against a target, a project's current consensus, one of
its releases or its imported reference labels (docs/judges-evaluation.md).

An evaluation needs the judge's answer on every target pair in both orders. Answers already on
hand are reused: the evaluation's judgements (called earlier or imported) and the judge's
filter-run verdicts on the same (pair, order), errors excepted. Only what is still missing is
called, as Celery batches through the filter runs' machinery (``judges.runs.calls``: one
backend per judge per worker, answers written as they come in, retries of transient failures
with backoff), each batch safe
to run twice thanks to the unique (judge, pair, order) of ``Judgement``. When nothing is
missing, the answers are scored (``judges.evaluation.scoring.evaluate``) and stored on the
evaluation.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from annotation.core.jobs import StalledJobs, job_publish, stalled_before
from annotation.models import Pair, PairStatus, Project, Release
from annotation.pairs.selectors import pair_pks_by_external_id
from annotation.releases.selectors import release_rows
from judges.evaluation.scoring import (
    DEFAULT_SEED,
    MAX_SEED,
    ORDERS,
    Answer,
    TargetItem,
    evaluate,
    signed_score,
)
from judges.models import Judge, JudgeEvaluation, Judgement, Verdict
from judges.roster.selectors import judges_for_project
from judges.roster.services import check_judge_enabled, disabled_judges_message
from judges.runs import services as runs
from judges.runs.calls import batch_calls_before, judge_item, judges_call

Status = JudgeEvaluation.Status
# The task that judges a batch (judges/tasks.py registers it by this name).
EVALUATION_BATCH_TASK = "judges.judge_evaluation_batch"
logger = logging.getLogger(__name__)


def _labelled_target(pairs: QuerySet[Pair], label_field: str) -> list[TargetItem]:
    """``pairs`` with a non-blank ``label_field`` as target items (gold and excluded pairs
    left out), in primary-key order."""
    rows = (
        pairs.filter(is_gold=False)
        .exclude(status=PairStatus.EXCLUDED)
        .exclude(**{label_field: ""})
        .order_by("pk")
        .values_list(
            "pk",
            "external_id",
            "task",
            "criterion",
            label_field,
            "response_a__model_name",
            "response_b__model_name",
        )
    )
    return [
        TargetItem(pk, external_id, task, criterion, label, bool(model_a) and model_a == model_b)
        for pk, external_id, task, criterion, label, model_a, model_b in rows
    ]


def consensus_target(project: Project) -> list[TargetItem]:
    """The project's pairs with a consensus (adjudicated ones included), gold pairs left out."""
    pairs = Pair.objects.filter(project=project, status=PairStatus.CONSENSUS)
    return _labelled_target(pairs, "consensus_label")


def release_target(project: Project, version: str) -> list[TargetItem]:
    """The rows of the project's published release ``version``, read from its files
    (``release_rows``, docs/releases.md) and matched to the project's pairs by external id."""
    release = Release.objects.filter(project=project, version=version).first()
    if release is None:
        raise ValidationError({"release": f"No release {project.slug}@{version}."})
    if release.status != Release.Status.PUBLISHED:
        raise ValidationError(
            {"release": f"Release {project.slug}@{version} is {release.status}, not published."}
        )
    rows = list(release_rows(release))
    ids = pair_pks_by_external_id(project=project, external_ids=[row["id"] for row in rows])
    if missing := [row["id"] for row in rows if row["id"] not in ids]:
        raise ValidationError(
            {"release": f"{len(missing)} pairs of the release are gone from the project "
             f"(first: {missing[0]!r})."}
        )  # fmt: skip
    return [
        TargetItem(
            ids[row["id"]],
            row["id"],
            row["task"],
            row["criterion"],
            row["label"],
            bool(row["chosen_model"]) and row["chosen_model"] == row["rejected_model"],
        )
        for row in rows
    ]


def reference_target(project: Project) -> list[TargetItem]:
    """The project's pairs with a reference label (``Pair.prior_label``: MMRB2's ``chosen``,
    Omni-RewardBench's ``criteria_preference``), whatever Arbiter's own votes decided; gold
    pairs left out."""
    return _labelled_target(Pair.objects.filter(project=project), "prior_label")


def evaluation_target(*, project: Project, release: str = "") -> list[TargetItem]:
    """The labelled pairs of the target: a published release's rows, the reference labels
    (``release`` is ``JudgeEvaluation.REFERENCE``), or the project's current consensus when
    ``release`` is blank."""
    if release == JudgeEvaluation.REFERENCE:
        return reference_target(project)
    return release_target(project, release) if release else consensus_target(project)


def _answers(evaluation: JudgeEvaluation) -> dict[tuple[int, str], Answer]:
    """The judge's answers on the target's pairs: its judgements, else its latest filter-run
    verdict that is not an error or a skip (a judge sent more since may see the pair now).
    Reads the project's rows and keeps the target's."""
    wanted = {item[0] for item in evaluation.target}
    answers: dict[tuple[int, str], Answer] = {}
    # Through the project's runs, not its pairs: a handful of runs leads the join whatever
    # the table statistics say (on pairs just imported, a join led by the pairs was planned
    # as a nested loop over the judge's every verdict: seconds instead of milliseconds).
    verdicts = (
        Verdict.objects.filter(judge=evaluation.judge, run__project=evaluation.project)
        .exclude(outcome__in=[Verdict.Outcome.ERROR, Verdict.Outcome.SKIPPED])
        .order_by("pk")
        .values_list("pair_id", "order", "side", "confidence")
    )
    for pair_id, order, side, confidence in verdicts.iterator(chunk_size=5000):
        if pair_id in wanted:
            answers[(pair_id, order)] = Answer(side, signed_score(side, confidence, None))
    # The judge's judgements, kept when on the target (a judgement's pair is in one project).
    judgements = Judgement.objects.filter(judge=evaluation.judge).values_list(
        "pair_id", "order", "side", "confidence", "margin"
    )
    for pair_id, order, side, confidence, margin in judgements.iterator(chunk_size=5000):
        if pair_id in wanted:
            answers[(pair_id, order)] = Answer(side, signed_score(side, confidence, margin))
    return answers


def _missing(evaluation: JudgeEvaluation) -> list[list]:
    """``[pair_id, order]`` of the target that have no answer yet, in target order."""
    answered = set(_answers(evaluation))
    return [
        [item[0], order]
        for item in evaluation.target
        for order in ORDERS
        if (item[0], order) not in answered
    ]


def check_evaluation(*, judge: Judge, project: Project, release: str = "") -> list[TargetItem]:
    """The target's items; ValidationError naming the field when the evaluation cannot run."""
    if not judges_for_project(project).filter(pk=judge.pk).exists():
        raise ValidationError({"judge": f"No judge {judge.name!r} for project {project.slug}."})
    items = evaluation_target(project=project, release=release)
    if not items:
        raise ValidationError({"target": f"{project.slug} has no labelled pairs to score."})
    return items


def judge_evaluation_create(
    *,
    judge: Judge,
    project: Project,
    release: str = "",
    seed: int = DEFAULT_SEED,
    call: bool = True,
    created_by=None,
) -> JudgeEvaluation:
    """Starts (or starts again) the evaluation of ``judge`` on the target. With ``call`` the
    missing answers are asked of the judge by Celery batches; without, the answers on hand
    are scored now (missing ones count as no vote). A disabled judge is never called: with
    ``call`` it is refused (ValidationError on ``judge``), as out-of-range seeds are."""
    if call:
        check_judge_enabled(judge)
    if not 0 <= seed <= MAX_SEED:
        raise ValidationError({"seed": f"The seed must lie in 0..{MAX_SEED}; got {seed}."})
    items = check_evaluation(judge=judge, project=project, release=release)
    with transaction.atomic():
        evaluation, _ = JudgeEvaluation.objects.update_or_create(
            judge=judge,
            project=project,
            release=release,
            defaults={
                "status": Status.RUNNING if call else Status.PENDING,
                "seed": seed,
                "target": [item.as_list() for item in items],
                "results": {},
                "calls": 0,
                "error": "",
                "created_by": created_by,
                "started_at": timezone.now(),
                "finished_at": None,
                "progress_at": timezone.now(),
            },
        )
    if not call:
        judge_evaluation_score(evaluation=evaluation)
        return evaluation
    transaction.on_commit(lambda: _start(evaluation))
    evaluation.refresh_from_db()
    return evaluation


def _start(evaluation: JudgeEvaluation) -> None:
    # Its batches are sent after the commit; a refusal fails the evaluation.
    _enqueue_missing(
        evaluation,
        on_refused=lambda exc: judge_evaluation_fail(evaluation_id=evaluation.pk, error=str(exc)),
    )


def judge_evaluation_resume(*, evaluation: JudgeEvaluation) -> int:
    """Asks again for whatever the target still lacks (after a crash or a failure) and returns
    how many items were enqueued; scores the evaluation when nothing is missing. A disabled
    judge is refused when anything is missing (it would be called)."""
    if _missing(evaluation):
        check_judge_enabled(evaluation.judge)
    JudgeEvaluation.objects.filter(pk=evaluation.pk).update(
        status=Status.RUNNING, error="", finished_at=None, progress_at=timezone.now()
    )
    evaluation.refresh_from_db()
    return _enqueue_missing(evaluation)


def _enqueue_missing(evaluation: JudgeEvaluation, *, on_refused=None) -> int:
    missing = _missing(evaluation)
    if not missing:
        judge_evaluation_score(evaluation=evaluation)
        return 0
    size = 2 * settings.ARBITER_JUDGE_BATCH_PAIRS
    for start in range(0, len(missing), size):
        _enqueue_batch(evaluation, missing[start : start + size], on_refused=on_refused)
    return len(missing)


def _enqueue_batch(
    evaluation: JudgeEvaluation,
    items: list[list],
    *,
    attempt: int = 1,
    countdown: float = 0,
    on_refused=None,
) -> None:
    job_publish(
        EVALUATION_BATCH_TASK,
        kwargs={"evaluation_id": evaluation.pk, "items": items, "attempt": attempt},
        queue=evaluation.judge.queue,
        countdown=countdown or None,
        on_refused=on_refused,
        after_commit=False,
    )


def judge_evaluation_judge_batch(*, evaluation_id: int, items: list, attempt: int = 1) -> None:
    """Asks the judge about the batch's items that still have no answer and records its
    judgements; transient failures go back to the queue with backoff, as in filter runs."""
    evaluation = (
        JudgeEvaluation.objects.select_related("judge", "project").filter(pk=evaluation_id).first()
    )
    if evaluation is None or evaluation.status != Status.RUNNING:
        return
    judge = evaluation.judge
    if (disabled := disabled_judges_message([judge])) is not None:
        # Disabled while its batches waited: never called; enabling it lets it resume.
        judge_evaluation_fail(
            evaluation_id=evaluation.pk, error=f"{disabled} Enable it and resume the evaluation."
        )
        return
    calls_before = batch_calls_before(items)
    pair_ids = {pk for pk, _ in calls_before}
    done = set(
        Judgement.objects.filter(judge=judge, pair_id__in=pair_ids).values_list("pair_id", "order")
    )
    pairs = (
        Pair.objects.filter(pk__in=pair_ids, project=evaluation.project)
        .select_related("prompt", "response_a", "response_b")
        .in_bulk()
    )
    todo = [
        judge_item(pairs[pk], order, allow_tie=evaluation.project.has_tie)
        for pk, order in calls_before
        if (pk, order) not in done and pk in pairs
    ]
    if todo:

        def record(answers: dict) -> bool:
            rows = answers.get(judge, [])
            Judgement.objects.bulk_create(
                [Judgement(judge=judge, **fields) for fields in rows], ignore_conflicts=True
            )
            JudgeEvaluation.objects.filter(pk=evaluation.pk).update(
                calls=F("calls") + sum(fields["attempts"] for fields in rows),
                progress_at=timezone.now(),
            )
            return True  # an evaluation cannot be stopped while its batches run

        calls = judges_call(
            todo={judge: todo},
            calls_before={judge.pk: calls_before},
            attempt=attempt,
            record=record,
        )
        if calls.stopped:
            return
        if retry := calls.retry.get(judge):
            countdown = runs.retry_countdown(attempt)
            _enqueue_batch(evaluation, retry, attempt=attempt + 1, countdown=countdown)
            return
    judge_evaluation_finish_if_complete(evaluation_id=evaluation.pk)


def judge_evaluation_finish_if_complete(*, evaluation_id: int) -> bool:
    """Scores the evaluation when every target item has an answer; True if this call did."""
    evaluation = JudgeEvaluation.objects.filter(pk=evaluation_id, status=Status.RUNNING).first()
    if evaluation is None or _missing(evaluation):
        return False
    return judge_evaluation_score(evaluation=evaluation)


def judge_evaluation_score(*, evaluation: JudgeEvaluation) -> bool:
    """Scores the answers on hand and stores the results; the conditional UPDATE lets one
    finisher win when batches finish together. True when this call stored them."""
    started = time.perf_counter()
    items = [TargetItem.from_list(values) for values in evaluation.target]
    results = evaluate(items, _answers(evaluation), seed=evaluation.seed)
    results["seconds"] = round(time.perf_counter() - started, 3)
    stored = JudgeEvaluation.objects.filter(
        pk=evaluation.pk, status__in=[Status.PENDING, Status.RUNNING]
    ).update(status=Status.SUCCEEDED, results=results, finished_at=timezone.now())
    evaluation.refresh_from_db()
    return bool(stored)


class _StalledEvaluations(StalledJobs[tuple[int, datetime]]):
    """Running evaluations without progress for ``ARBITER_STALLED_AFTER_S``; a conditional
    UPDATE of ``progress_at`` claims each one, so concurrent sweeps resume it once."""

    noun = "evaluation"

    def stalled(self):
        return JudgeEvaluation.objects.filter(
            status=Status.RUNNING, progress_at__lt=stalled_before()
        ).values_list("pk", "progress_at")

    def claim(self, job):
        pk, progress_at = job
        return JudgeEvaluation.objects.filter(
            pk=pk, status=Status.RUNNING, progress_at=progress_at
        ).update(progress_at=timezone.now())

    def recover(self, job):
        evaluation = JudgeEvaluation.objects.select_related("judge", "project").get(pk=job[0])
        return _enqueue_missing(evaluation)


STALLED_EVALUATIONS = _StalledEvaluations()


def judge_evaluations_resume_stalled() -> list[int]:
    """Resumes every stalled evaluation (Celery beat's sweep); returns the ids resumed."""
    return STALLED_EVALUATIONS.sweep()


def judge_evaluation_fail(*, evaluation_id: int, error: str) -> None:
    """Records an unexpected failure, so an evaluation never hangs in "running"."""
    JudgeEvaluation.objects.filter(
        pk=evaluation_id, status__in=[Status.PENDING, Status.RUNNING]
    ).update(status=Status.FAILED, error=error[:2000], finished_at=timezone.now())
