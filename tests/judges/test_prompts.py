"""Judge prompts as data (docs/judges.md, "Prompt templates"): the presets, a judge's own
template, validation on save naming the field, and the MMRB2 preset's answers parsed into a
side and a confidence, through the loopback OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from judges.backends import get_backend
from judges.models import Judge
from judges.parsing import UnparseableAnswer, parse_verdict
from judges.prompts import PRESETS, PromptSpec, build_prompt
from judges.roster.services import judge_create
from tests.factories import JudgeFactory
from tests.judges.backend_helpers import image_part, item, text_part
from tests.judges.fake_openai import FakeOpenAI, Reply

ARBITER_TEXT = "\n".join(
    [
        "RUBRIC",
        "",
        "[Prompt]",
        "Which is better?",
        "[End of Prompt]",
        "",
        "[Response 1]",
        "Answer one",
        "[End of Response 1]",
        "",
        "[Response 2]",
        "Answer two",
        "[End of Response 2]",
        "",
        "[Criterion]",
        "Judge only by this criterion: brevity",
        "",
        "Compare Response 1 and Response 2 and reply with a JSON object only, no other text: "
        '{"better": "1" or "2", "confidence": a number from 0 to 1, "reasoning": "one to three '
        'sentences"}. You must choose one response, even when they are close.',
    ]
)


def test_the_arbiter_preset_is_arbiters_prompt():
    parts = build_prompt(item(criterion="brevity"), rubrics={"text": "RUBRIC"})
    assert parts == [{"type": "text", "text": ARBITER_TEXT}]


def test_an_own_template_places_text_and_images_where_its_placeholders_are():
    template = "Q: {prompt}\n1) {response_1}\n2) {response_2}\n{{json}} {scale}. {criterion}"
    spec = PromptSpec.from_options({"prompt_template": template})
    first = [text_part("look"), image_part("f" * 64)]
    parts = build_prompt(item(first, allow_tie=True), spec=spec)
    assert parts == [
        {"type": "text", "text": "Q: Which is better?\n1) look"},
        {"type": "image", "media": "f" * 64},
        {
            "type": "text",
            "text": "2) Answer two\n{json} Response 1, Response 2, or a tie when neither is "
            "better. ",
        },
    ]


def test_the_mmrb2_preset_asks_for_better_response_and_a_score():
    spec = PromptSpec.from_options({"prompt": "mmrb2"})
    assert spec.answer_format == "mmrb2"
    text = build_prompt(item(allow_tie=True), spec=spec)[0]["text"]
    assert '"better_response": "Response 1" or "Response 2"' in text
    assert '"score": an integer from 1 to 6' in text
    assert "Choose between Response 1 or Response 2." in text  # MMRB2 offers no tie


@pytest.mark.parametrize(
    ("answer", "preferred", "confidence"),
    [
        ('{"reasoning": "r", "better_response": "Response 1", "score": 6}', "first", 1.0),
        ('{"reasoning": "r", "better_response": "Response 2", "score": 2}', "second", 0.8),
        ('```json\n{"better_response": "Response 1", "score": "4"}\n```', "first", 0.6),
        ('{"score": 3}', "second", 0.6),
        ('{"better_response": "Response 2"}', "second", None),
    ],
)
def test_the_mmrb2_answer_format_is_parsed(answer, preferred, confidence):
    verdict = parse_verdict(answer, allow_tie=False, answer_format="mmrb2")
    assert (verdict.preferred, verdict.confidence) == (preferred, confidence)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (
            '{"better_response": "Response 1", "score": 2}',
            "better_response names Response 1 but score 2 favours Response 2",
        ),
        ('{"better_response": "Response 1", "score": 7}', "not a whole number from 1 to 6"),
        ('{"better_response": "Response 1", "score": 4.5}', "not a whole number from 1 to 6"),
        ('{"better_response": "neither"}', "unknown value 'neither' for 'better_response'"),
    ],
)
def test_a_bad_mmrb2_answer_is_unparseable_saying_why(answer, reason):
    with pytest.raises(UnparseableAnswer, match=reason):
        parse_verdict(answer, allow_tie=True, answer_format="mmrb2")


def test_the_arbiter_format_ignores_a_score():
    verdict = parse_verdict('{"better": "2", "score": 6}', allow_tie=False)
    assert (verdict.preferred, verdict.confidence) == ("second", None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"prompt_template": "{prompt} {response_1} {response_2} {answer}"},
            "Option prompt_template: unknown placeholder {answer}; use {rubric}, {prompt}",
        ),
        (
            {"prompt_template": "{prompt} {response_1}"},
            "Option prompt_template: the template must place {response_2}.",
        ),
        (
            {"prompt_template": "{prompt} {response_1} {response_2} }"},
            "Single '}' encountered in format string; write a literal brace as {{ or }}",
        ),
        (
            {"prompt_template": "{prompt!r} {response_1} {response_2}"},
            "placeholder {prompt} takes no format or conversion",
        ),
        ({"prompt": "fancy"}, "Option prompt must be a preset: arbiter, mmrb2, omni, omni-ties."),
        (
            {"answer_format": "xml"},
            "Option answer_format must be one of arbiter, mmrb2, omni, omni-ties.",
        ),
    ],
)
def test_a_bad_prompt_option_is_refused_on_save_naming_the_field(db, options, message):
    with pytest.raises(ValidationError) as error:
        judge_create(
            name="j", kind="openai", base_url="http://127.0.0.1:9/v1", model="m", options=options
        )
    assert message in error.value.message_dict["options"][0]
    assert not Judge.objects.exists()


def test_add_judge_takes_a_preset_and_a_template_file(db, tmp_path, capsys):
    call_command(
        "add_judge", "mm", "--kind", "openai", "--base-url", "http://h/v1", "--model", "m",
        "--prompt", "mmrb2",
    )  # fmt: skip
    assert Judge.objects.get(name="mm").options == {"prompt": "mmrb2"}
    bad = tmp_path / "bad.txt"
    bad.write_text("{prompt} {response_1} {response_2} {oops}")
    with pytest.raises(CommandError, match=r"unknown placeholder \{oops\}"):
        call_command(
            "add_judge", "own", "--kind", "openai", "--base-url", "http://h/v1", "--model", "m",
            "--prompt-template-file", str(bad),
        )  # fmt: skip
    with pytest.raises(CommandError, match="prompt options do not apply to --kind heuristic"):
        call_command("add_judge", "h", "--kind", "heuristic", "--prompt", "mmrb2")


def test_an_mmrb2_judge_on_the_loopback_server_gets_sides_and_confidences(db):
    def answer(request):
        score = 5 if "GOOD" in request.response_text(1) else 1
        better = "Response 1" if score > 3 else "Response 2"
        return Reply(
            content=json.dumps({"reasoning": "r", "better_response": better, "score": score})
        )

    with FakeOpenAI(answer) as server:
        judge = JudgeFactory(
            name="mm", kind="openai", base_url=server.base_url, model="m",
            options={"prompt": "mmrb2"},
        )  # fmt: skip
        backend = get_backend(judge)
        try:
            results = backend.judge_batch(
                [item("GOOD", "bad", order="AB"), item("bad", "GOOD", order="BA")]
            )
        finally:
            backend.close()
        assert "better_response" in server.requests[0].text
    assert [(r.outcome, r.preferred, r.confidence) for r in results] == [
        ("ok", "first", 0.8),
        ("ok", "second", 1.0),
    ]
    assert set(PRESETS) == {"arbiter", "mmrb2", "omni", "omni-ties"}
