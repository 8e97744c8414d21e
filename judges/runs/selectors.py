"""Reads for filter runs: progress while running, per-judge statistics during and after,
the runs that stalled, and a pair's verdicts for its page."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, Max, OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest

from annotation.core.jobs import stalled_before
from annotation.models import Pair
from judges.ensemble import ORDERS, VerdictRow, ensemble_decide, judge_stats
from judges.models import FilterRun, Verdict

# A run that is not over: the sweep may resume it, a cancel may stop it.
ACTIVE = (FilterRun.Status.PENDING, FilterRun.Status.RUNNING)

# Reasons a judge gave no vote, shown per judge: the most frequent first, this many at most.
REASONS_SHOWN = 5
# Pairs no judge could see, named on the run's page and in the API: this many at most.
UNSEEN_PAIRS_SHOWN = 50

# Above this many verdicts a running run's per-judge agreement, consistency and latency wait
# for the end of the run: computing them reads every verdict, and the page polls every 2 s.
LIVE_STATS_MAX_VERDICTS = 50_000


def filter_run_progress(run: FilterRun) -> dict:
    """Verdicts done and expected, overall and per judge, from two aggregate queries."""
    judges = list(run.judges.order_by("name"))
    per_judge_expected = run.pairs.count() * len(ORDERS)
    counts: defaultdict[int, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    rows = (
        Verdict.objects.filter(run=run)
        .values("judge_id", "outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        counts[row["judge_id"]][row["outcome"]] = row["n"]
    per_judge: list[dict[str, Any]] = []
    for judge in judges:
        outcomes = counts[judge.pk]
        per_judge.append(
            {
                "name": judge.name,
                "kind": judge.kind,
                "queue": judge.queue,
                "done": sum(outcomes.values()),
                "expected": per_judge_expected,
                **{o: outcomes[o] for o in Verdict.Outcome.values},
            }
        )
    done = sum(j["done"] for j in per_judge)
    expected = per_judge_expected * len(judges)
    last = Verdict.objects.filter(run=run).aggregate(last=Max("created_at"))["last"]
    return {
        "done": done,
        "expected": expected,
        "percent": int(100 * done / expected) if expected else 0,
        "judges": per_judge,
        "last_verdict_at": last,
        # Offered a Resume: the periodic sweep would resume it too (ARBITER_STALLED_AFTER_S).
        "stalled": not run.finished and stalled_filter_runs().filter(pk=run.pk).exists(),
    }


def filter_run_report(run: FilterRun) -> dict:
    """Progress plus, per judge, agreement with the ensemble, position consistency, latency
    and tokens: stored when the run finished, computed from the verdicts so far otherwise
    (up to LIVE_STATS_MAX_VERDICTS; ``stats_pending`` says they wait for the end)."""
    progress = filter_run_progress(run)
    stats = run.summary.get("judges") if run.status == FilterRun.Status.SUCCEEDED else None
    stats_pending = stats is None and progress["done"] > LIVE_STATS_MAX_VERDICTS
    if stats_pending:
        stats = {}
    elif stats is None:
        stats = _live_judge_stats(run)
    for judge in progress["judges"]:
        for key in (
            "agreement",
            "agreement_n",
            "position_consistency",
            "position_consistency_n",
            "median_latency_ms",
            "prompt_tokens",
            "completion_tokens",
        ):
            judge[key] = stats.get(judge["name"], {}).get(key)
    reasons = filter_run_reasons(run)
    for judge in progress["judges"]:
        judge["reasons"] = reasons.get(judge["name"], [])
    pairs = {
        key: run.summary.get(key)
        for key in ("pairs", "easy", "queued", "returned", "no_votes", "too_few_votes")
    }
    return {
        **progress,
        "pairs": pairs if run.summary else None,
        "stats_pending": stats_pending,
        "unseen": unseen_pairs(run, judges=len(progress["judges"])),
    }


# What a call that gave no vote says when its verdict recorded no reason.
_NO_REASON = {
    Verdict.Outcome.UNPARSEABLE: "the answer could not be read",
    Verdict.Outcome.ERROR: "no reason recorded",
    Verdict.Outcome.ABSTAIN: "the judge abstained",
    Verdict.Outcome.SKIPPED: "the judge is not sent a kind of part the pair holds",
}


def filter_run_reasons(run: FilterRun) -> dict[str, list[dict]]:
    """Per judge name, why its calls gave no vote: each reason (the verdict's error, the
    parts a skipped pair holds) with its outcome and count, the most frequent first
    (``REASONS_SHOWN`` of them), so "18 errors" always says what they were."""
    rows = (
        Verdict.objects.filter(run=run)
        .exclude(outcome=Verdict.Outcome.OK)
        .values("judge__name", "outcome", "error")
        .annotate(n=Count("id"))
        .order_by("judge__name", "-n", "outcome", "error")
    )
    reasons: defaultdict[str, list[dict]] = defaultdict(list)
    for row in rows:
        shown = reasons[row["judge__name"]]
        if len(shown) < REASONS_SHOWN:
            shown.append(
                {
                    "outcome": row["outcome"],
                    "reason": row["error"] or _NO_REASON[row["outcome"]],
                    "count": row["n"],
                }
            )
    return dict(reasons)


def unseen_pairs(run: FilterRun, *, judges: int) -> dict:
    """The run's pairs that every judge skipped in both orders, since none is sent a kind of
    part they hold: their count and the first ``UNSEEN_PAIRS_SHOWN`` (id, external id, the
    reasons). No judge can vote on them; they go to the annotators undecided."""
    if not judges:
        return {"count": 0, "pairs": []}
    skipped = (
        Verdict.objects.filter(run=run, outcome=Verdict.Outcome.SKIPPED)
        .values("pair_id")
        .annotate(n=Count("id"))
        .filter(n=judges * len(ORDERS))
        .values("pair_id")
    )
    unseen = Pair.objects.filter(pk__in=skipped).order_by("pk")
    shown = list(unseen.values("pk", "external_id")[:UNSEEN_PAIRS_SHOWN])
    why: defaultdict[int, set[str]] = defaultdict(set)
    for pair_id, error in Verdict.objects.filter(
        run=run, outcome=Verdict.Outcome.SKIPPED, pair_id__in=[p["pk"] for p in shown]
    ).values_list("pair_id", "error"):
        why[pair_id].add(error)
    return {
        "count": unseen.count(),
        "pairs": [
            {"id": p["pk"], "external_id": p["external_id"], "reasons": sorted(why[p["pk"]])}
            for p in shown
        ],
    }


def _live_judge_stats(run: FilterRun) -> dict[str, dict]:
    rows = verdict_rows(run)
    votes = defaultdict(list)
    for row in rows:
        votes[row.pair_id].append(row.side if row.outcome == Verdict.Outcome.OK else None)
    decisions = {
        pk: ensemble_decide(v, threshold=run.threshold, min_votes=run.min_valid_votes)
        for pk, v in votes.items()
    }
    names = dict(run.judges.values_list("pk", "name"))
    return {names[pk]: stats for pk, stats in judge_stats(rows, decisions).items()}


def pair_verdicts(pair: Pair) -> dict:
    """The pair page's judges section: every verdict on ``pair``, per run and judge with both
    orders side by side, newest run first, and the ensemble decision written onto the pair
    with the run that made it (by its number, as every page shows runs). Two queries, three
    when that run left no verdict on the pair."""
    verdicts = (
        Verdict.objects.filter(pair=pair)
        .select_related("judge", "run")
        .order_by("-run__created_at", "-run_id", "judge__name", "order")
    )
    runs: dict[int, dict[str, Any]] = {}
    for verdict in verdicts:
        run = runs.setdefault(verdict.run_id, {"run": verdict.run, "judges": {}})
        run["judges"].setdefault(verdict.judge.name, {})[verdict.order] = verdict
    summary = pair.ensemble_summary or {}
    # The summary names its run by id; pages number runs per project (``FilterRun.number``).
    decided_by = summary.get("run")
    shown = next((e["run"] for e in runs.values() if e["run"].pk == decided_by), None)
    if decided_by is not None and shown is None:
        shown = FilterRun.objects.filter(project_id=pair.project_id, pk=decided_by).first()
    return {
        "pair": pair,
        "runs": [
            {
                "run": entry["run"],
                "judges": [
                    {"name": name, "orders": [orders.get(order) for order in ORDERS]}
                    for name, orders in entry["judges"].items()
                ],
            }
            for entry in runs.values()
        ],
        "orders": ORDERS,
        "decision": {
            "label": pair.ensemble_label,
            "agreement": pair.ensemble_agreement,
            "run": shown.pk if shown else None,
            "run_number": shown.number if shown else None,
            "threshold": summary.get("threshold"),
            "min_valid_votes": summary.get("min_valid_votes"),
            "votes": summary.get("votes") or {},
            "invalid": summary.get("invalid"),
        },
    }


def stalled_filter_runs():
    """Unfinished runs with no progress (no verdict, start or resume) for
    ``ARBITER_STALLED_AFTER_S``: their queued work may have been lost with a worker."""
    last_verdict = (
        Verdict.objects.filter(run=OuterRef("pk"))
        .order_by()
        .values("run")
        .annotate(last=Max("created_at"))
        .values("last")
    )
    created = "created_at"
    return (
        FilterRun.objects.filter(status__in=ACTIVE)
        .annotate(
            progress_at=Greatest(
                Coalesce(Subquery(last_verdict), created),
                Coalesce("started_at", created),
                Coalesce("resumed_at", created),
            )
        )
        .filter(progress_at__lt=stalled_before())
    )


def verdict_rows(run: FilterRun, *, judge_ids=None) -> list[VerdictRow]:
    verdicts = Verdict.objects.filter(run=run)
    if judge_ids is not None:
        verdicts = verdicts.filter(judge_id__in=judge_ids)
    return [
        VerdictRow(*values)
        for values in verdicts.values_list(
            "judge_id",
            "pair_id",
            "order",
            "outcome",
            "side",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
        )
    ]
