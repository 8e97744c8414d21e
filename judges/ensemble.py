"""The ensemble rule and per-judge statistics, as pure functions over votes.

A vote is a canonical side: ``"A"``, ``"B"`` or ``"tie"``; anything else (unparseable, error,
abstain, skipped, missing) is not a valid vote. A tie vote counts toward the total but toward
neither side, so a pair is never easy by tie: it is easy when A or B alone holds at least
``threshold`` of all valid votes across judges and both orders, a share compared exactly: at
0.9 MMRB2's 9 judges x 2 orders need 17 of 18 votes, 3 judges need 6 of 6; and only with at
least ``min_votes`` valid votes, so that judges skipping a pair (or failing on it) never leave
two votes of one judge to take it from the annotators (docs/judges-runs.md).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

SIDES = ("A", "B", "tie")
ORDERS = ("AB", "BA")
# The share of valid votes one side needs for a pair to be easy, unless a run says otherwise.
DEFAULT_EASY_THRESHOLD = 0.9
# Shares are compared with this slack, so 0.9 * 10 (9.000000000000002) counts as 9 votes.
_SHARE_EPSILON = 1e-9


def default_min_votes(judges: int) -> int:
    """The fewest valid votes an easy pair needs, unless a run says otherwise: one per judge
    of the run, half the votes of a pair that every judge answered in both orders (9 of
    MMRB2's 18), so a pair every judge voted on is decided exactly as by the share alone."""
    return max(1, judges)


@dataclass(frozen=True)
class Decision:
    """What the ensemble says about one pair."""

    label: str  # "A", "B" or "tie" (A and B level, or tie votes the plurality); "" without votes
    agreement: float | None  # share of valid votes on the majority side (A or B); None without
    easy: bool
    votes: dict[str, int]  # valid votes per side
    invalid: int  # unparseable, error, abstain and skipped answers
    # The share would make it easy, but it has fewer valid votes than the run's minimum.
    too_few_votes: bool = False

    @property
    def valid(self) -> int:
        return sum(self.votes.values())


def ensemble_decide(
    votes: Iterable[str | None], *, threshold: float, min_votes: int = 1
) -> Decision:
    """Decides one pair from all its votes (every judge, both orders): easy when one side
    holds ``threshold`` of the valid votes and there are at least ``min_votes`` of them."""
    counts: Counter[str] = Counter()
    invalid = 0
    for vote in votes:
        if vote in SIDES:
            counts[vote] += 1
        else:
            invalid += 1
    per_side = {side: counts[side] for side in SIDES}
    total = sum(per_side.values())
    if total == 0:
        return Decision(label="", agreement=None, easy=False, votes=per_side, invalid=invalid)
    a, b, tie = per_side["A"], per_side["B"], per_side["tie"]
    majority = max(a, b)
    agreement = majority / total
    label = "tie" if a == b or tie > majority else ("A" if a > b else "B")
    share_easy = label in ("A", "B") and majority >= votes_needed(total, threshold=threshold)
    enough = total >= min_votes
    return Decision(
        label=label,
        agreement=agreement,
        easy=share_easy and enough,
        votes=per_side,
        invalid=invalid,
        too_few_votes=share_easy and not enough,
    )


def votes_needed(valid: int, *, threshold: float) -> int:
    """Votes the majority side needs among ``valid`` votes: the fewest whose share is at least
    ``threshold`` (17 of 18 and 6 of 6 at 0.9)."""
    return max(1, math.ceil(threshold * valid - _SHARE_EPSILON))


def easy_votes(*, threshold: float, judges: int) -> str:
    """Votes an easy pair needs when every call of ``judges`` judges (both orders) is valid,
    e.g. "6 of 6"."""
    votes = judges * len(ORDERS)
    return f"{votes_needed(votes, threshold=threshold)} of {votes}"


def easy_rule(*, threshold: float, judges: int, min_votes: int | None = None) -> str:
    """The rule in words and votes for a run of ``judges`` judges, e.g. "easy when one side
    holds at least 90% of the valid votes: 6 of 6 with 3 judges in both orders", and with
    ``min_votes`` above 1 ", and only with at least 3 valid votes"."""
    rule = (
        f"easy when one side holds at least {100 * threshold:g}% of the valid votes: "
        f"{easy_votes(threshold=threshold, judges=judges)} with {judges} "
        f"judge{'' if judges == 1 else 's'} in both orders"
    )
    if min_votes is not None and min_votes > 1:
        rule += f", and only with at least {min_votes} valid votes"
    return rule


def contested_first(decisions: dict[int, Decision]) -> list[int]:
    """Pair ids, most contested first: no valid votes, then lowest agreement, then id."""
    return sorted(
        decisions,
        key=lambda pk: (
            decisions[pk].agreement is not None,
            decisions[pk].agreement or 0.0,
            pk,
        ),
    )


@dataclass(frozen=True)
class VerdictRow:
    """The columns of a verdict that statistics need."""

    judge_id: int
    pair_id: int
    order: str
    outcome: str
    side: str
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def judge_stats(rows: Iterable[VerdictRow], decisions: dict[int, Decision]) -> dict[int, dict]:
    """Per judge: verdicts by outcome, agreement with the ensemble label, position consistency
    (share of pairs judged validly in both orders where both give the same canonical side),
    each with its ``_n`` (verdicts compared, pairs judged in both orders), median latency and
    tokens."""
    by_judge: dict[int, list[VerdictRow]] = defaultdict(list)
    for row in rows:
        by_judge[row.judge_id].append(row)
    stats = {}
    for judge_id, judge_rows in by_judge.items():
        outcomes = Counter(row.outcome for row in judge_rows)
        sides_by_pair: dict[int, dict[str, str]] = defaultdict(dict)
        agree = compared = 0
        for row in judge_rows:
            if row.outcome != "ok":
                continue
            sides_by_pair[row.pair_id][row.order] = row.side
            decision = decisions.get(row.pair_id)
            if decision is not None and decision.label:
                compared += 1
                agree += row.side == decision.label
        both = [orders for orders in sides_by_pair.values() if len(orders) == 2]
        consistent = sum(orders["AB"] == orders["BA"] for orders in both)
        latencies = [row.latency_ms for row in judge_rows if row.latency_ms is not None]
        stats[judge_id] = {
            "verdicts": len(judge_rows),
            "ok": outcomes["ok"],
            "unparseable": outcomes["unparseable"],
            "error": outcomes["error"],
            "abstain": outcomes["abstain"],
            "skipped": outcomes["skipped"],
            "agreement": agree / compared if compared else None,
            "agreement_n": compared,
            "position_consistency": consistent / len(both) if both else None,
            "position_consistency_n": len(both),
            "median_latency_ms": statistics.median(latencies) if latencies else None,
            "prompt_tokens": sum(row.prompt_tokens or 0 for row in judge_rows),
            "completion_tokens": sum(row.completion_tokens or 0 for row in judge_rows),
        }
    return stats
