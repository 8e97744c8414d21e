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
    pairs = {
        key: run.summary.get(key) for key in ("pairs", "easy", "queued", "returned", "no_votes")
    }
    return {**progress, "pairs": pairs if run.summary else None, "stats_pending": stats_pending}


def _live_judge_stats(run: FilterRun) -> dict[str, dict]:
    rows = verdict_rows(run)
    votes = defaultdict(list)
    for row in rows:
        votes[row.pair_id].append(row.side if row.outcome == Verdict.Outcome.OK else None)
    decisions = {pk: ensemble_decide(v, threshold=run.threshold) for pk, v in votes.items()}
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
