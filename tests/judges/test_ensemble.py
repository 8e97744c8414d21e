"""The ensemble rule on constructed votes, and per-judge statistics."""

from __future__ import annotations

import pytest

from judges.ensemble import (
    DEFAULT_EASY_THRESHOLD,
    VerdictRow,
    contested_first,
    default_min_votes,
    easy_rule,
    easy_votes,
    ensemble_decide,
    judge_stats,
    votes_needed,
)


def votes(**counts: int) -> list[str | None]:
    """``votes(A=16, B=2, unparseable=1)``: a list of canonical sides and invalid answers."""
    out = []
    for side, n in counts.items():
        invalid = ("unparseable", "error", "abstain", "skipped", "none")
        out += [None if side in invalid else side] * n
    return out


def test_mmrb2_rule_17_of_18_is_easy():
    decision = ensemble_decide(votes(A=17, B=1), threshold=0.9)
    assert decision.easy
    assert decision.label == "A"
    assert decision.agreement == pytest.approx(17 / 18)
    assert decision.valid == 18


def test_mmrb2_rule_16_of_18_is_not_easy():
    # 16 of 18 is 88.9%: below 90%, however close the rounded vote count comes
    decision = ensemble_decide(votes(B=16, A=2), threshold=0.9)
    assert not decision.easy
    assert decision.label == "B"
    assert decision.agreement == pytest.approx(16 / 18)


@pytest.mark.parametrize(
    ("a", "b", "easy"),
    [(18, 0, True), (17, 1, True), (16, 2, False), (6, 0, True), (5, 1, False), (9, 1, True)],
)
def test_threshold_is_a_share_compared_exactly(a, b, easy):
    # at 0.9: 17 of 18 (94%) and 6 of 6 pass; 16 of 18 (89%) and 5 of 6 (83%) do not
    assert ensemble_decide(votes(A=a, B=b), threshold=0.9).easy is easy


@pytest.mark.parametrize(
    ("a", "b", "easy"), [(18, 0, True), (17, 1, True), (16, 2, False), (1, 17, True)]
)
def test_mmrb2_rule_is_unchanged_by_the_default_minimum_when_every_judge_votes(a, b, easy):
    """9 judges x 2 orders, every call a vote: the default minimum (one per judge, 9) never
    stands in the way, and the share decides exactly as without it."""
    minimum = default_min_votes(9)
    assert minimum == 9
    decision = ensemble_decide(votes(A=a, B=b), threshold=0.9, min_votes=minimum)
    assert decision == ensemble_decide(votes(A=a, B=b), threshold=0.9)
    assert decision.easy is easy
    assert not decision.too_few_votes


def test_skipped_judges_leave_too_few_votes_for_an_easy_pair():
    """7 of MMRB2's 9 judges skip a video pair and one more fails: the last judge's 2 of 2 A
    hold the share, but 2 valid votes are fewer than the run's minimum, so the pair stays with
    the annotators; the share alone (a minimum of 1) would have taken it from them."""
    few = votes(A=2, skipped=14, error=2)
    decision = ensemble_decide(few, threshold=0.9, min_votes=default_min_votes(9))
    assert (decision.easy, decision.too_few_votes) == (False, True)
    assert (decision.label, decision.valid, decision.invalid) == ("A", 2, 16)
    assert ensemble_decide(few, threshold=0.9).easy  # the rule before the minimum
    assert ensemble_decide(votes(A=9, skipped=9), threshold=0.9, min_votes=9).easy
    # too few votes is said only of a pair the share would have made easy
    split = ensemble_decide(votes(A=1, B=1, skipped=16), threshold=0.9, min_votes=9)
    assert (split.easy, split.too_few_votes) == (False, False)
    assert [default_min_votes(n) for n in (0, 1, 3)] == [1, 1, 3]


def test_the_rule_in_words_names_the_minimum():
    assert easy_rule(threshold=0.9, judges=9, min_votes=9) == (
        "easy when one side holds at least 90% of the valid votes: 17 of 18 with 9 judges in "
        "both orders, and only with at least 9 valid votes"
    )
    assert easy_rule(threshold=0.9, judges=1, min_votes=1) == easy_rule(threshold=0.9, judges=1)


def test_votes_needed_is_the_fewest_votes_holding_the_share():
    assert votes_needed(18, threshold=0.9) == 17
    assert votes_needed(6, threshold=0.9) == 6
    assert votes_needed(10, threshold=0.9) == 9  # 0.9 x 10 is 9.000000000000002 in floats
    assert votes_needed(4, threshold=1.0) == 4
    assert votes_needed(4, threshold=0.75) == 3
    assert votes_needed(1, threshold=0.9) == 1


def test_the_rule_in_votes_for_a_run():
    assert easy_rule(threshold=0.9, judges=3) == (
        "easy when one side holds at least 90% of the valid votes: 6 of 6 with 3 judges "
        "in both orders"
    )
    assert easy_votes(threshold=0.9, judges=9) == "17 of 18"
    assert easy_votes(threshold=DEFAULT_EASY_THRESHOLD, judges=5) == "9 of 10"


def test_a_higher_threshold_filters_fewer_pairs():
    assert ensemble_decide(votes(A=17, B=1), threshold=0.9).easy
    assert not ensemble_decide(votes(A=17, B=1), threshold=0.95).easy  # 17.1 -> 18 needed
    assert ensemble_decide(votes(A=16, B=2), threshold=0.85).easy  # 15.3 -> 16 needed
    assert not ensemble_decide(votes(A=17, B=1), threshold=1.0).easy


def test_unparseable_errors_and_abstentions_are_not_votes():
    decision = ensemble_decide(votes(A=15, B=1, unparseable=1, error=1), threshold=0.9)
    assert decision.valid == 16
    assert decision.invalid == 2
    assert decision.agreement == pytest.approx(15 / 16)
    assert decision.easy  # 15 of 16 valid votes
    # the same 15 A among 18 valid votes is not easy
    assert not ensemble_decide(votes(A=15, B=3), threshold=0.9).easy
    assert not ensemble_decide(votes(A=13, B=3, abstain=2), threshold=0.9).easy  # 13 of 16


def test_no_valid_votes_is_never_easy():
    decision = ensemble_decide(votes(unparseable=10, error=6, abstain=2), threshold=0.9)
    assert not decision.easy
    assert decision.label == ""
    assert decision.agreement is None
    assert decision.invalid == 18
    assert not ensemble_decide([], threshold=0.9).easy


def test_tie_votes_count_toward_the_total_but_no_side():
    decision = ensemble_decide(votes(A=15, tie=3), threshold=0.9)
    assert decision.agreement == pytest.approx(15 / 18)
    assert decision.label == "A"
    assert not decision.easy
    assert ensemble_decide(votes(A=17, tie=1), threshold=0.9).easy
    all_tie = ensemble_decide(votes(tie=18), threshold=0.9)
    assert all_tie.label == "tie"
    assert all_tie.agreement == 0
    assert not all_tie.easy
    level = ensemble_decide(votes(A=9, B=9), threshold=0.9)
    assert level.label == "tie"
    assert level.agreement == pytest.approx(0.5)


def test_contested_first_orders_by_agreement_with_unjudged_first():
    decisions = {
        1: ensemble_decide(votes(A=17, B=1), threshold=0.9),
        2: ensemble_decide(votes(A=10, B=8), threshold=0.9),
        3: ensemble_decide(votes(error=18), threshold=0.9),
        4: ensemble_decide(votes(A=12, B=6), threshold=0.9),
    }
    assert contested_first(decisions) == [3, 2, 4, 1]


def test_judge_stats_position_consistency_and_agreement():
    decisions = {
        1: ensemble_decide(votes(A=5, B=1), threshold=0.9),
        2: ensemble_decide(votes(B=5, A=1), threshold=0.9),
    }
    rows = [
        # judge 1 is consistent and agrees; judge 2 always prefers what it sees first
        VerdictRow(1, 1, "AB", "ok", "A", 100, 10, 2),
        VerdictRow(1, 1, "BA", "ok", "A", 300, 10, 2),
        VerdictRow(1, 2, "AB", "ok", "B", 200, 10, 2),
        VerdictRow(1, 2, "BA", "unparseable", "", 50, 10, 2),
        VerdictRow(2, 1, "AB", "ok", "A"),
        VerdictRow(2, 1, "BA", "ok", "B"),
        VerdictRow(2, 2, "AB", "ok", "A"),
        VerdictRow(2, 2, "BA", "ok", "B"),
    ]
    stats = judge_stats(rows, decisions)
    assert stats[1]["position_consistency"] == 1.0  # pair 2 lacks a valid BA: not compared
    assert stats[1]["agreement"] == 1.0
    assert stats[1]["unparseable"] == 1
    assert stats[1]["ok"] == 3
    assert stats[1]["median_latency_ms"] == 150
    assert stats[1]["prompt_tokens"] == 40
    assert stats[1]["completion_tokens"] == 8
    assert stats[2]["position_consistency"] == 0.0
    assert stats[2]["agreement"] == 0.5
    assert stats[2]["median_latency_ms"] is None
