"""Judge evaluation scores on constructed answers worked out by hand
(docs/judges-evaluation.md)."""

from __future__ import annotations

import pytest

from judges.evaluation.scoring import Answer, TargetItem, evaluate, signed_score, tie_calibrated


def item(pk: int, label: str, *, task: str = "text", criterion: str = "", same: bool = False):
    return TargetItem(pk, f"p{pk}", task, criterion, label, same)


def answers(table: dict[int, tuple[str | None, str | None]], scores: dict | None = None) -> dict:
    out = {}
    for pk, sides in table.items():
        for order, side in zip(("AB", "BA"), sides, strict=True):
            if side is not None:
                score = (scores or {}).get((pk, order))
                out[(pk, order)] = Answer(side, score)
    return out


def value(report: dict, metric: str, part: str = "overall") -> float | None:
    return report[part][metric]["value"]


def test_every_metric_on_five_pairs_worked_out_by_hand():
    items = [item(1, "A"), item(2, "B"), item(3, "A"), item(4, "tie"), item(5, "B")]
    given = answers({1: ("A", "A"), 2: ("A", "B"), 3: ("B", ""), 4: ("tie", "A"), 5: ("B", "B")})
    report = evaluate(items, given, resamples=200)
    # Dual (MMRB2): 2 + 1 + 0 + 2 right of the 7 answers given on the four A/B pairs: pair 3's
    # BA order has no answer and leaves the denominator.
    assert value(report, "dual_accuracy") == pytest.approx(5 / 7)
    assert report["overall"]["dual_accuracy"]["n"] == 7
    # Strict: the missing answer is wrong, 5 of 8.
    assert value(report, "dual_accuracy_strict") == pytest.approx(5 / 8)
    assert report["overall"]["dual_accuracy_strict"]["answered"] == pytest.approx(7 / 8)
    assert report["overall"]["dual_accuracy_strict"]["on_answered"] == pytest.approx(5 / 7)
    # Omni-RB: the AB answer is the prediction: 1 A (right), 2 A (wrong), 3 B (wrong), 5 B.
    assert value(report, "accuracy_without_ties") == pytest.approx(2 / 4)
    # With ties: pair 4's tie prediction on a tie label is right: 3 of 5.
    assert value(report, "accuracy_with_ties") == pytest.approx(3 / 5)
    # Both orders answered on 1, 2, 4, 5; the same side on 1 and 5.
    assert value(report, "position_consistency") == pytest.approx(2 / 4)
    # A/B votes: 8; the first-shown response chosen by 1/AB, 2/AB, 2/BA, 5/BA.
    assert value(report, "first_shown_share") == pytest.approx(4 / 8)
    assert report["answers"] == {"expected": 10, "votes": 9, "answered": 0.9}  # a tie is a vote
    assert report["labels"] == {"A": 2, "B": 2, "tie": 1}
    low, high = (
        report["overall"]["dual_accuracy"]["low"],
        report["overall"]["dual_accuracy"]["high"],
    )
    assert 0 <= low <= 5 / 7 <= high <= 1


def test_missing_and_tie_answers_as_mmrb2_and_omni_rewardbench_score_them():
    """The worked case of docs/judges-evaluation.md: three A/B pairs and a tie pair."""
    items = [item(1, "A"), item(2, "B"), item(3, "A"), item(4, "tie")]
    # Pair 1 right twice; pair 2: a tie answer (wrong), then right; pair 3: no answer in AB
    # (a failed call), wrong in BA; pair 4: tie, then A.
    given = answers({1: ("A", "A"), 2: ("tie", "B"), 3: (None, "B"), 4: ("tie", "A")})
    overall = evaluate(items, given, resamples=0)["overall"]
    # MMRB2: answers given on A/B pairs 5 (1AB 1BA 2AB 2BA 3BA), right 3 -> 3/5.
    assert overall["dual_accuracy"]["value"] == pytest.approx(3 / 5)
    assert overall["dual_accuracy"]["n"] == 5
    assert overall["dual_accuracy"]["answered"] == pytest.approx(5 / 6)
    # Strict: 3 of the 6 orders.
    assert overall["dual_accuracy_strict"]["value"] == pytest.approx(3 / 6)
    # Omni-RB without ties (pairs 1-3, AB answers A, tie, none): 1 right of 3.
    assert overall["accuracy_without_ties"]["value"] == pytest.approx(1 / 3)
    assert overall["accuracy_without_ties"]["answered"] == pytest.approx(2 / 3)
    assert overall["accuracy_without_ties"]["on_answered"] == pytest.approx(1 / 2)
    # With ties: pair 4's tie on a tie label is right too: 2 of 4.
    assert overall["accuracy_with_ties"]["value"] == pytest.approx(2 / 4)
    assert overall["accuracy_with_ties"]["on_answered"] == pytest.approx(2 / 3)


def test_the_worked_case_as_text_to_audio_is_scored_on_its_ba_answers():
    """The same answers on t2a pairs: Omni-RewardBench's run_exp_t2a.py shows response2
    first, so the prediction is the BA answer (A, B, B, A)."""
    items = [item(pk, label, task="t2a") for pk, label in ((1, "A"), (2, "B"), (3, "A"))]
    items.append(item(4, "tie", task="t2a"))
    given = answers({1: ("A", "A"), 2: ("tie", "B"), 3: (None, "B"), 4: ("tie", "A")})
    overall = evaluate(items, given, resamples=0)["overall"]
    # Without ties: 1 A right, 2 B right, 3 B wrong; with ties pair 4's A is wrong too.
    assert overall["accuracy_without_ties"]["value"] == pytest.approx(2 / 3)
    assert overall["accuracy_without_ties"]["answered"] == pytest.approx(3 / 3)
    assert overall["accuracy_with_ties"]["value"] == pytest.approx(2 / 4)
    # The dual accuracy reads both orders whatever the task.
    assert overall["dual_accuracy"]["value"] == pytest.approx(3 / 5)


def test_a_judge_that_mostly_abstains_shows_how_little_it_answered():
    items = [item(pk, "A") for pk in range(10)]
    given = answers({0: ("A", "A"), 1: ("B", "B"), **{pk: ("", "") for pk in range(2, 10)}})
    overall = evaluate(items, given, resamples=0)["overall"]
    assert overall["dual_accuracy"]["value"] == 0.5
    assert overall["dual_accuracy"]["answered"] == pytest.approx(0.2)
    assert overall["dual_accuracy_strict"]["value"] == pytest.approx(0.1)
    assert overall["accuracy_with_ties"]["answered"] == pytest.approx(0.2)


def test_a_judge_that_always_answers_a_scores_the_share_of_pairs_labelled_a():
    labels = ["A", "A", "B", "tie", "A", "B", "A"]
    items = [item(pk, label) for pk, label in enumerate(labels)]
    report = evaluate(items, answers({pk: ("A", "A") for pk in range(len(labels))}))
    # Of the six pairs with a side, four chose A.
    assert value(report, "dual_accuracy") == pytest.approx(4 / 6)
    assert value(report, "accuracy_without_ties") == pytest.approx(4 / 6)
    assert value(report, "accuracy_with_ties") == pytest.approx(4 / 7)
    assert value(report, "position_consistency") == 1.0
    assert value(report, "first_shown_share") == 0.5


def test_a_judge_that_always_picks_the_first_response_scores_one_half_and_is_never_consistent():
    items = [item(pk, label) for pk, label in enumerate(["A", "B", "B", "A"])]
    report = evaluate(items, answers({pk: ("A", "B") for pk in range(4)}))
    assert value(report, "dual_accuracy") == 0.5
    # Omni-RB's one answer per pair is the AB one, always A: right on the two A pairs.
    assert value(report, "accuracy_without_ties") == 0.5
    assert value(report, "position_consistency") == 0.0
    assert value(report, "first_shown_share") == 1.0


def test_breakdowns_per_task_criterion_and_model_pair():
    items = [
        item(1, "A", task="t2i", same=True),
        item(2, "B", task="t2i", criterion="text rendering"),
        item(3, "A", task="edit", criterion="text rendering"),
    ]
    report = evaluate(items, answers({1: ("A", "A"), 2: ("A", "A"), 3: ("A", "B")}))
    assert report["by_task"]["t2i"]["dual_accuracy"]["value"] == pytest.approx(2 / 4)
    assert report["by_task"]["edit"]["dual_accuracy"]["value"] == pytest.approx(1 / 2)
    assert report["by_criterion"]["text rendering"]["dual_accuracy"]["value"] == pytest.approx(
        1 / 4
    )
    assert report["by_criterion"]["(no criterion)"]["dual_accuracy"]["value"] == 1.0
    assert report["by_model_pair"]["same model"]["pairs"] == 1
    assert report["by_model_pair"]["different models"]["dual_accuracy"]["value"] == 0.25


def test_tie_calibrated_accuracy_on_a_case_computed_by_hand():
    # Mean scores: 0.9 (A), -0.3 (B), 0.1 (tie), -0.2 (tie), 0.15 (A).
    # Margin 0: 3 right; 0.1: pair 3 becomes a tie, 4 right; 0.15: pair 5 wrongly a tie, 3;
    # 0.2: pair 4 a tie, 4 right; 0.3: pair 2 wrongly a tie, 3; 0.9: only the ties, 2.
    items = [item(1, "A"), item(2, "B"), item(3, "tie"), item(4, "tie"), item(5, "A")]
    scores = {
        (1, "AB"): 0.8, (1, "BA"): 1.0,
        (2, "AB"): -0.3, (2, "BA"): -0.3,
        (3, "AB"): 0.6, (3, "BA"): -0.4,
        (4, "AB"): -0.2, (4, "BA"): -0.2,
        (5, "AB"): 0.15, (5, "BA"): 0.15,
    }  # fmt: skip
    sides = {1: ("A", "A"), 2: ("B", "B"), 3: ("A", "B"), 4: ("B", "B"), 5: ("A", "A")}
    result = tie_calibrated(items, answers(sides, scores))
    assert result == {"margin": pytest.approx(0.1), "accuracy": 0.8, "n": 5, "margins_tried": 6}


def test_tie_calibration_needs_a_score_on_every_vote():
    items = [item(1, "A"), item(2, "tie")]
    given = answers({1: ("A", "A"), 2: ("A", "B")}, {(1, "AB"): 0.7, (1, "BA"): 0.6})
    assert tie_calibrated(items, given) is None
    assert evaluate(items, given)["tie_calibrated"] is None


def test_signed_score_prefers_the_judges_margin_then_its_confidence():
    assert signed_score("B", 0.8, None) == -0.8
    assert signed_score("tie", 0.6, None) == 0
    assert signed_score("A", 0.8, -0.25) == -0.25
    assert signed_score("A", None, None) is None


def test_the_same_seed_gives_the_same_intervals_and_another_seed_other_ones():
    items = [item(pk, "A" if pk % 3 else "B") for pk in range(60)]
    given = answers({pk: ("A", "A" if pk % 2 else "B") for pk in range(60)})
    first = evaluate(items, given, seed=1)
    assert evaluate(items, given, seed=1) == first
    assert evaluate(items, given, seed=2)["overall"] != first["overall"]
