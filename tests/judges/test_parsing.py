"""Reading judges' answers: tolerant of wrapping, never guessing."""

from __future__ import annotations

import pytest

from judges.parsing import UnparseableAnswer, parse_verdict
from judges.prompts import answer_instruction, build_prompt, task_family
from tests.judges.backend_helpers import item

PARSED = [
    ('{"better": "1", "confidence": 0.8, "reasoning": "sharper"}', "first", 0.8, "sharper"),
    ('{"better": "2"}', "second", None, ""),
    ('```json\n{"better": "2", "confidence": 0.7}\n```', "second", 0.7, ""),
    (
        'Sure! Here is my verdict:\n{"better": "1", "confidence": "90%"} Hope it helps.',
        "first",
        0.9,
        "",
    ),
    ('{"better": 2, "confidence": 85}', "second", 0.85, ""),
    ('{"better": "Response 1", "confidence": 1.5e9}', "first", None, ""),
    ('{"Better": "B", "reason": "fewer artifacts"}', "second", None, "fewer artifacts"),
    ('draft {"better": "1"} final answer {"better": "2", "confidence": 0.6}', "second", 0.6, ""),
    ('{"better": "tie", "confidence": 0.5}', "tie", 0.5, ""),
    ("After comparing both, my final verdict is [[A]].", "first", None, None),
    ("[[2]]", "second", None, None),
    ("Both are equally good. [[C]]", "tie", None, None),
    ("[[B]] ... as I said, [[B]]", "second", None, None),
    ("2", "second", None, ""),
    ("Response 1", "first", None, ""),
    ("Response 2 is better.", "second", None, ""),
    ("**B**", "second", None, ""),
]


@pytest.mark.parametrize(("text", "preferred", "confidence", "reasoning"), PARSED)
def test_answers_that_are_read(text, preferred, confidence, reasoning):
    verdict = parse_verdict(text, allow_tie=True)
    assert verdict.preferred == preferred
    assert verdict.confidence == confidence
    if reasoning is not None:
        assert verdict.reasoning == reasoning


UNPARSEABLE = [
    "",
    "   ",
    "I think the first one, probably {not json",
    "Response 1 is better because it is sharper, although Response 2 has nicer colours.",
    "I prefer Response 1 overall.",
    "[[A]] at first glance, but on reflection [[B]]",
    '{"better": "both"}',
    '{"confidence": 0.9, "reasoning": "no verdict key"}',
    '{"better": true}',
    "The answer is 1 or 2.",
]


@pytest.mark.parametrize("text", UNPARSEABLE)
def test_answers_that_are_not_guessed(text):
    with pytest.raises(UnparseableAnswer):
        parse_verdict(text, allow_tie=True)


def test_the_strict_text_rule_reads_only_a_bare_verdict():
    assert parse_verdict("Response 1 is better", allow_tie=False).preferred == "first"
    with pytest.raises(UnparseableAnswer):
        parse_verdict("Response 1 is better, mostly.", allow_tie=False)


def test_a_tie_that_was_not_offered_is_unparseable():
    with pytest.raises(UnparseableAnswer, match="tie"):
        parse_verdict('{"better": "tie"}', allow_tie=False)
    with pytest.raises(UnparseableAnswer, match="tie"):
        parse_verdict("[[C]]", allow_tie=False)


def test_task_families():
    assert task_family("t2i") == "t2i"
    assert task_family("text-to-image-counting") == "t2i"
    assert task_family("edit") == "edit"
    assert task_family("interleaved") == "interleaved"
    assert task_family("reasoning-math") == "reasoning"
    assert task_family("") == "text"
    assert task_family("summarisation") == "text"


def test_prompt_has_rubric_prompt_responses_in_order_criterion_and_answer_format():
    parts = build_prompt(
        item("FIRST SHOWN", "SECOND SHOWN", task="t2i", criterion="text rendering only")
    )
    text = parts[0]["text"]
    assert len(parts) == 1  # consecutive text is merged
    assert "text-to-image" in text
    positions = [
        text.index(marker)
        for marker in (
            "[Prompt]",
            "Which is better?",
            "[Response 1]",
            "FIRST SHOWN",
            "[Response 2]",
            "SECOND SHOWN",
            "text rendering only",
            '"better"',
        )
    ]
    assert positions == sorted(positions)
    assert '"tie"' not in text


def test_prompt_offers_tie_only_when_allowed():
    assert '"tie"' in answer_instruction(allow_tie=True)
    assert '"tie"' not in answer_instruction(allow_tie=False)


def test_prompt_keeps_images_in_place():
    parts = build_prompt(
        item(
            [{"type": "text", "text": "here:"}, {"type": "image", "media": "f" * 64}],
            "none",
            task="edit",
        )
    )
    kinds = [p["type"] for p in parts]
    assert kinds == ["text", "image", "text"]
    assert parts[0]["text"].endswith("here:")
    assert parts[2]["text"].startswith("[End of Response 1]")
