"""Omni-RewardBench's task prompts as presets, without and with ties (docs/judges.md,
"Omni-RewardBench presets"), and their [[A]]/[[B]]/[[C]] verdicts parsed as the benchmark's
released parser reads them, through the loopback OpenAI-compatible server."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from judges.backends import get_backend
from judges.models import Judge
from judges.parsing import UnparseableAnswer, parse_verdict
from judges.prompts import (
    OMNI_GENERAL_CRITERION,
    OMNI_INTRODUCTIONS,
    PromptSpec,
    build_prompt,
    omni_task,
)
from tests.judges.backend_helpers import item, text_part
from tests.judges.fake_openai import FakeOpenAI, Reply

VIDEO = {"type": "video", "media": "e" * 64}


def _text(parts: list[dict]) -> str:
    return "".join(p["text"] if p["type"] == "text" else f"<{p['type']}>" for p in parts)


def test_the_omni_preset_is_the_tasks_prompt_without_ties():
    spec = PromptSpec.from_options({"prompt": "omni"})
    parts = build_prompt(
        item([VIDEO], [text_part("a still"), VIDEO], task="t2v", criterion="Smooth motion."),
        spec=spec,
    )
    assert parts[1] == VIDEO
    assert parts[3] == VIDEO
    text = _text(parts)
    assert text.startswith(OMNI_INTRODUCTIONS["t2v"] + "\n\n")
    assert "according to this criterion:\n\nSmooth motion.\n\n" in text
    assert "do not let their order bias your answer" in text
    assert (
        'final verdict in exactly this format: "[[A]]" if Response A is better, "[[B]]" if '
        "Response B is better.\n\n" in text
    )
    assert "[[C]]" not in text
    assert text.endswith(
        "[[PROMPT]]\nWhich is better?\n[[END OF PROMPT]]\n"
        "[[RESPONSE A]]<video>[[END OF RESPONSE A]]\n"
        "[[RESPONSE B]]\na still<video>[[END OF RESPONSE B]]"
    )


def test_the_omni_ties_preset_offers_c_and_asks_to_avoid_it():
    spec = PromptSpec.from_options({"prompt": "omni-ties"})
    assert spec.answer_format == "omni-ties"
    text = _text(build_prompt(item(task="t2t", criterion="Be correct."), spec=spec))
    assert text.startswith(OMNI_INTRODUCTIONS["t2t"])
    assert '"[[C]]" if you cannot decide which one is better (or they are equal)' in text
    assert 'avoid a "tie" where you can and be as decisive as possible' in text


@pytest.mark.parametrize(
    ("task", "omni"),
    [
        ("t2t", "t2t"), ("ti2t", "ti2t"), ("tv2t", "tv2t"), ("ta2t", "ta2t"), ("t2i", "t2i"),
        ("t2v", "t2v"), ("t2a", "t2a"), ("t23d", "t23d"), ("ti2i", "ti2i"),
        ("text-to-image", "t2i"), ("edit", "ti2i"), ("reasoning", "t2t"), ("", "t2t"),
    ],
)  # fmt: skip
def test_each_task_gets_its_omni_introduction(task, omni):
    assert omni_task(task) == omni
    spec = PromptSpec.from_options({"prompt": "omni"})
    assert _text(build_prompt(item(task=task), spec=spec)).startswith(OMNI_INTRODUCTIONS[omni])


def test_a_pair_without_a_criterion_is_judged_by_a_general_one():
    text = _text(build_prompt(item(), spec=PromptSpec.from_options({"prompt": "omni"})))
    assert f"according to this criterion:\n\n{OMNI_GENERAL_CRITERION}\n\n" in text


@pytest.mark.parametrize(
    ("answer", "answer_format", "allow_tie", "preferred"),
    [
        ("Response A keeps the motion smooth. [[A]]", "omni", False, "first"),
        ("Final verdict: [[B]]", "omni", True, "second"),
        (r"The answer is \boxed{B}.", "omni", False, "second"),
        ("[[C]]", "omni-ties", True, "tie"),
        (r"\boxed{C}", "omni-ties", True, "tie"),
        # as the released parser: [[A]] is looked for before [[C]]
        ("Nearly a tie [[C]], but [[A]]", "omni-ties", True, "first"),
        # no Omni token: the general rules still read a JSON answer
        ('{"better": "2"}', "omni", False, "second"),
    ],
)
def test_omni_verdicts_are_read_as_the_released_parser_reads_them(
    answer, answer_format, allow_tie, preferred
):
    verdict = parse_verdict(answer, allow_tie=allow_tie, answer_format=answer_format)
    assert verdict.preferred == preferred


@pytest.mark.parametrize(
    ("answer", "answer_format", "allow_tie", "reason"),
    [
        ("[[A]] or [[B]], hard to say", "omni", False, "contradictory verdicts [[A]] and [[B]]"),
        (
            r"\boxed{A} \boxed{B}",
            "omni-ties",
            True,
            r"contradictory verdicts \boxed{A} and \boxed{B}",
        ),
        # the prompt without ties never offered one, even on a scale with ties
        ("[[C]]", "omni", True, "answered tie, which was not offered"),
        # with ties offered by the prompt, a scale without them still refuses one
        ("[[C]]", "omni-ties", False, "answered tie, which was not offered"),
        ("I like the first one", "omni", False, "no verdict found"),
    ],
)
def test_a_bad_omni_answer_is_unparseable_saying_why(answer, answer_format, allow_tie, reason):
    with pytest.raises(UnparseableAnswer, match=re.escape(reason)):
        parse_verdict(answer, allow_tie=allow_tie, answer_format=answer_format)


def test_an_omni_ties_judge_on_the_loopback_server_votes_ties_and_sides(db):
    def answer(request):
        text = request.text
        shown_a = text[text.rindex("[[RESPONSE A]]") : text.index("[[END OF RESPONSE A]]")]
        shown_b = text[text.rindex("[[RESPONSE B]]") : text.index("[[END OF RESPONSE B]]")]
        if "GOOD" in shown_a and "GOOD" in shown_b:
            return Reply(content="Both equally good. [[C]]")
        return Reply(content="Verdict: " + ("[[A]]" if "GOOD" in shown_a else "[[B]]"))

    with FakeOpenAI(answer) as server:
        judge = Judge.objects.create(
            name="omni", kind="openai", base_url=server.base_url, model="m",
            options={"prompt": "omni-ties"},
        )  # fmt: skip
        backend = get_backend(judge)
        try:
            results = backend.judge_batch(
                [
                    item("GOOD", "bad", order="AB", allow_tie=True),
                    item("bad", "GOOD", order="BA", allow_tie=True),
                    item("GOOD 1", "GOOD 2", allow_tie=True),
                ]
            )
        finally:
            backend.close()
    assert [(r.outcome, r.preferred) for r in results] == [
        ("ok", "first"),
        ("ok", "second"),
        ("ok", "tie"),
    ]
    assert results[2].reasoning == "Both equally good. [[C]]"


def test_add_judge_takes_the_omni_presets(db):
    for preset in ("omni", "omni-ties"):
        call_command(
            "add_judge", preset, "--kind", "openai", "--base-url", "http://h/v1", "--model", "m",
            "--prompt", preset,
        )  # fmt: skip
        assert Judge.objects.get(name=preset).options == {"prompt": preset}
