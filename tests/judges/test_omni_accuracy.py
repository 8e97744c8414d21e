"""Omni-RewardBench's accuracies of its nine tasks worked out by hand from a judge's answers,
as each task's released script gets them (docs/judges-evaluation.md, "What is scored"):
``run_exp.py`` shows ``response1`` as Response A for eight tasks; ``run_exp_t2a.py`` shows
``response2`` first for text-to-audio and maps the verdict back. Arbiter asks both orders and
must score each task on the answer in its script's order."""

from __future__ import annotations

import pytest

from judges.evaluation.scoring import Answer, TargetItem, evaluate
from judges.parsing import UnparseableAnswer, parse_verdict
from judges.prompts import omni_order

TASKS = ("t2t", "ti2t", "tv2t", "ta2t", "t2i", "t2v", "t2a", "t23d", "ti2i")

# Six pairs, the same in every task: the reference label (criteria_preference), then what a
# judge answered with response1 shown as Response A (AB) and with response2 shown as Response
# A (BA), in the words it was shown. A judge drawn to the first response shown, often.
PAIRS = [
    ("response1", "Response A is better. [[A]]", "Response A is better. [[A]]"),
    ("response2", "[[A]]", "[[A]]"),
    ("response1", "[[B]]", "[[B]]"),
    ("response2", "Verdict: [[B]]", "I cannot tell which one is better."),
    ("tie", "[[A]]", "They are equal. [[C]]"),
    ("response1", "[[A]] no, [[B]]", "[[B]]"),
]
_LABEL = {"response1": "A", "response2": "B", "tie": "tie"}

# By hand. Eight tasks (AB answers): pair 1 right, 2 wrong, 3 wrong, 4 right, 5 wrong (A on a
# tie), 6 unparseable (both verdicts): without ties 2 of the 5 A/B pairs, with ties 2 of 6.
# Text-to-audio (BA answers, A there being response2): pair 1 response2 (wrong), 2 response2
# (right), 3 response1 (right), 4 none (wrong), 5 tie (right), 6 response1 (right): without
# ties 3 of 5, with ties 4 of 6.
BY_HAND = {task: (2 / 5, 2 / 6) for task in TASKS} | {"t2a": (3 / 5, 4 / 6)}


def _released_prediction(answer: str, *, shown_first: str) -> str | None:
    """What the released scripts predict from one answer: the first of their verdict tokens
    found (none when both A and B are there), named as the sample's response, the one shown
    as Response A being ``shown_first``."""
    for first, second in (("[[A]]", "[[B]]"), ("\\boxed{A}", "\\boxed{B}")):
        if first in answer and second in answer:
            return None
    other = "response2" if shown_first == "response1" else "response1"
    named = {"A": shown_first, "B": other, "C": "tie"}
    for token in ("[[A]]", "[[B]]", "\\boxed{A}", "\\boxed{B}", "[[C]]", "\\boxed{C}"):
        if token in answer:
            return named[token.rstrip("]}")[-1]]  # the token's letter
    return None


def _released_accuracy(task: str, *, with_tie: bool) -> float:
    """A task's accuracy as its released script computes it: one answer per sample, in the
    script's presentation; tie-labelled samples dropped without ties; right when the
    prediction is the label, none or a tie on a decisive label being wrong."""
    samples = [pair for pair in PAIRS if with_tie or pair[0] != "tie"]
    right = 0
    for label, shown_ab, shown_ba in samples:
        if task == "t2a":
            predicted = _released_prediction(shown_ba, shown_first="response2")
        else:
            predicted = _released_prediction(shown_ab, shown_first="response1")
        right += predicted == label
    return right / len(samples)


def _arbiter_report() -> dict:
    """Arbiter's report on the same answers: each read by the omni-ties parser, in canonical
    terms (A is response1), for every pair of the nine tasks."""
    items, answers = [], {}
    for t, task in enumerate(TASKS):
        for p, (label, shown_ab, shown_ba) in enumerate(PAIRS):
            pk = t * 100 + p
            items.append(TargetItem(pk, f"{task}/{p}", task, "", _LABEL[label], False))
            for order, text in (("AB", shown_ab), ("BA", shown_ba)):
                try:
                    shown = parse_verdict(text, allow_tie=True, answer_format="omni-ties")
                except UnparseableAnswer:
                    continue
                canonical = {"first": "A", "second": "B", "tie": "tie"}[shown.preferred]
                if order == "BA" and canonical != "tie":
                    canonical = "B" if canonical == "A" else "A"
                answers[(pk, order)] = Answer(canonical)
    return evaluate(items, answers, resamples=0)


def test_text_to_audio_is_scored_on_its_answers_with_b_shown_first():
    assert omni_order("t2a") == "BA"
    assert {omni_order(task) for task in TASKS if task != "t2a"} == {"AB"}


@pytest.mark.parametrize("task", TASKS)
def test_each_tasks_accuracy_is_its_released_scripts(task):
    by_task = _arbiter_report()["by_task"][task]
    without_ties, with_ties = BY_HAND[task]
    assert _released_accuracy(task, with_tie=False) == pytest.approx(without_ties)
    assert _released_accuracy(task, with_tie=True) == pytest.approx(with_ties)
    assert round(by_task["accuracy_without_ties"]["value"], 4) == round(without_ties, 4)
    assert round(by_task["accuracy_with_ties"]["value"], 4) == round(with_ties, 4)
    assert by_task["accuracy_without_ties"]["n"] == 5
    assert by_task["accuracy_with_ties"]["n"] == 6


def test_the_nine_tasks_together_sum_each_tasks_right_answers():
    overall = _arbiter_report()["overall"]
    assert overall["accuracy_without_ties"]["value"] == pytest.approx((8 * 2 + 3) / 45)
    assert overall["accuracy_with_ties"]["value"] == pytest.approx((8 * 2 + 4) / 54)
    # The dual accuracy and the position figures read both orders, whatever the task.
    assert overall["position_consistency"]["n"] == 9 * 4
