"""Judge prompts as data: a template with placeholders (a preset, or a judge's own text) and
an answer format. The presets: Arbiter's prompt in MMRB2's style (a rubric for the task's
family, the prompt, the two responses in the order shown, the criterion if any, a request for
a JSON answer), an MMRB2-style pairwise prompt whose answer carries ``better_response`` and
a 1-6 score, and Omni-RewardBench's task prompts without and with ties (a task-specific
inspector's introduction, the criterion, ``[[PROMPT]]``/``[[RESPONSE A]]`` sections and a
``[[A]]``/``[[B]]`` (/``[[C]]``) verdict). See docs/judges.md, "Prompt templates"."""

from __future__ import annotations

import string
from dataclasses import dataclass

from annotation.core.content import MEDIA_PART_TYPES
from judges.backends.base import JudgeItem

FAMILIES = ("t2i", "edit", "interleaved", "reasoning", "text")

# Task slugs are free-form; these prefixes map common spellings onto a rubric family.
_FAMILY_PREFIXES = {
    "t2i": ("t2i", "text-to-image", "text2image", "text_to_image", "image-generation", "imagegen"),
    "edit": ("edit", "image-edit", "image_edit", "imageedit"),
    "interleaved": ("interleaved", "mixed"),
    "reasoning": ("reasoning", "math", "thinking", "visual-reasoning"),
}

RUBRICS = {
    "t2i": (
        "You are an expert judge of text-to-image generation. Two AI assistants produced an "
        "image for the same prompt. Judge which image better satisfies the prompt. Consider, in "
        "order of importance: faithfulness to the prompt (every requested object, count, "
        "attribute, spatial relation and any text to be rendered, spelled correctly); visual "
        "quality (no artifacts, distorted anatomy or incoherent structure); then aesthetics. "
        "Do not prefer a response for its length or for describing the image in words."
    ),
    "edit": (
        "You are an expert judge of image editing. Two AI assistants edited the input image "
        "according to the same instruction. Judge which edit is better. Consider: whether the "
        "requested change is made completely and correctly; whether everything the instruction "
        "does not ask to change is preserved (identity, layout, background, style); and the "
        "visual quality of the result (no artifacts, seams or inconsistent lighting)."
    ),
    "interleaved": (
        "You are an expert judge of interleaved text-and-image generation. Two AI assistants "
        "answered the same request with text and images. Judge which response better fulfils "
        "the request. Consider: whether the text and every image follow the request (number, "
        "order and content of images); whether text and images are consistent with each other "
        "and across images; the correctness and usefulness of the text; and visual quality."
    ),
    "reasoning": (
        "You are an expert judge of multimodal reasoning. Two AI assistants answered the same "
        "question, which may require reading the images carefully. Judge which response is "
        "better. Consider, in order of importance: the correctness of the final answer; the "
        "validity of each reasoning step and its use of the visual evidence; then clarity. A "
        "fluent response with a wrong answer is worse than a terse correct one."
    ),
    "text": (
        "You are an expert judge of AI assistants. Two assistants answered the same prompt. "
        "Judge which response is better. Consider: correctness and faithfulness to the prompt, "
        "helpfulness and completeness, and clarity. Do not prefer a response for its length, "
        "its style or its position."
    ),
}

PROMPT_HEADER = "[Prompt]"
END_OF_PROMPT = "[End of Prompt]"
CRITERION_HEADER = "[Criterion]"


def response_header(number: int) -> str:
    return f"[Response {number}]"


def response_footer(number: int) -> str:
    return f"[End of Response {number}]"


def task_family(task: str) -> str:
    """The rubric family of a free-form task slug (``text`` when nothing matches)."""
    slug = (task or "").strip().lower()
    for family, prefixes in _FAMILY_PREFIXES.items():
        if slug.startswith(prefixes):
            return family
    return "text"


# Answer formats: what the judge is asked to reply, and what the parser reads
# (judges/parsing.py): Arbiter's {"better", "confidence", "reasoning"}, or MMRB2's
# {"reasoning", "better_response", "score"} with a 1-6 score.
ARBITER_FORMAT = "arbiter"
MMRB2_FORMAT = "mmrb2"
# Omni-RewardBench's verdicts: [[A]] or [[B]] (Response A is the one shown first), and [[C]]
# for a tie in the "with ties" variant only.
OMNI_FORMAT = "omni"
OMNI_TIES_FORMAT = "omni-ties"
OMNI_FORMATS = (OMNI_FORMAT, OMNI_TIES_FORMAT)
ANSWER_FORMATS = (ARBITER_FORMAT, MMRB2_FORMAT, *OMNI_FORMATS)


def answer_instruction(*, allow_tie: bool, answer_format: str = ARBITER_FORMAT) -> str:
    if answer_format in OMNI_FORMATS:
        return _omni_verdict_instruction(ties=answer_format == OMNI_TIES_FORMAT)
    if answer_format == MMRB2_FORMAT:
        return (
            "Output your evaluation as a JSON object only, no other text: "
            '{"reasoning": "your step-by-step comparison", "better_response": "Response 1" or '
            '"Response 2", "score": an integer from 1 to 6}. The score says how much better: '
            "6 = Response 1 is much better, 5 = better, 4 = slightly better; 3 = Response 2 is "
            "slightly better, 2 = better, 1 = much better. You must choose one response, even "
            "when they are close."
        )
    choices = '"1", "2" or "tie"' if allow_tie else '"1" or "2"'
    tie_rule = (
        ' Answer "tie" only when neither response is better.'
        if allow_tie
        else " You must choose one response, even when they are close."
    )
    return (
        "Compare Response 1 and Response 2 and reply with a JSON object only, no other text: "
        f'{{"better": {choices}, "confidence": a number from 0 to 1, '
        '"reasoning": "one to three sentences"}.' + tie_rule
    )


def scale_words(*, allow_tie: bool, answer_format: str = ARBITER_FORMAT) -> str:
    """The choices a judge has, in words, for the ``{scale}`` placeholder."""
    if answer_format == OMNI_TIES_FORMAT:
        return "Response A, Response B, or a tie when you cannot decide"
    if answer_format == OMNI_FORMAT:
        return "Response A or Response B"
    if allow_tie and answer_format == ARBITER_FORMAT:
        return "Response 1, Response 2, or a tie when neither is better"
    return "Response 1 or Response 2"


# Placeholders a prompt template may use (docs/judges.md, "Prompt templates"); literal braces
# are written {{ and }}.
PLACEHOLDERS = {
    "rubric": "the rubric of the task's family (options.rubrics may replace it)",
    "prompt": "the pair's prompt, text and images",
    "response_1": "the response shown first, text and images",
    "response_2": "the response shown second",
    "criterion": "the criterion section ([Criterion] ...), empty when the pair has none",
    "criteria": "the pair's criterion alone (a general one when it has none)",
    "scale": "the choices the project's scale offers, in words",
    "answer_format": "the answer format's instruction (what to reply, as JSON)",
}
REQUIRED_PLACEHOLDERS = ("prompt", "response_1", "response_2")

_SECTIONS = (
    "{rubric}\n\n"
    "[Prompt]\n{prompt}\n[End of Prompt]\n\n"
    "[Response 1]\n{response_1}\n[End of Response 1]\n\n"
    "[Response 2]\n{response_2}\n[End of Response 2]\n\n"
)


@dataclass(frozen=True)
class Preset:
    template: str
    answer_format: str
    about: str
    # Where {rubric} comes from: the task family's rubric, or Omni-RewardBench's introduction
    # of the task (OMNI_INTRODUCTIONS).
    rubric_source: str = "family"


# Omni-RewardBench (arXiv 2510.23451). Its released evaluation code (HongbangYuan/OmniReward,
# utils/prompts/<task>.py, evaluation_experiments/run_exp.py) sends a system prompt made of a
# task-specific inspector's introduction, the criterion, the same instructions for every task
# and the verdict format, then [[PROMPT]] and [[RESPONSE A]]/[[RESPONSE B]] sections. These
# presets keep that structure, the section markers and the verdict tokens, in Arbiter's own
# words, in one user message (docs/judges.md, "Omni-RewardBench presets").
OMNI_INTRODUCTIONS = {
    "t2t": (
        "You are a helpful assistant who scores the answers of other AI assistants to a user's "
        "question against a given criterion. You are given one user prompt ([[PROMPT]]) and two "
        "responses ([[RESPONSE A]] and [[RESPONSE B]]) produced by two models."
    ),
    "ti2t": (
        'As a professional "Text-Image-to-Text" quality inspector, you score the answers of '
        "other AI assistants to an image understanding task against a given criterion. You are "
        "given the prompt with its image ([[PROMPT]]), a question about the image, and two "
        "responses ([[RESPONSE A]] and [[RESPONSE B]])."
    ),
    "tv2t": (
        'As a professional "Text-Video-to-Text" quality inspector, you score the answers of '
        "other AI assistants to a video understanding task against a given criterion. You are "
        "given the prompt with its video as frames sampled from the clip ([[PROMPT]]), a "
        "question about the video, and two responses ([[RESPONSE A]] and [[RESPONSE B]])."
    ),
    "ta2t": (
        'As a professional "Text-Audio-to-Text" quality inspector, you score the answers of '
        "other AI assistants to an audio understanding task against a given criterion. You are "
        "given the prompt with its audio clip ([[PROMPT]]), a question about the audio, and "
        "two responses ([[RESPONSE A]] and [[RESPONSE B]])."
    ),
    "t2i": (
        'As a professional "Text-to-Image" quality inspector, you assess the quality of two '
        "images ([[RESPONSE A]] and [[RESPONSE B]]) generated from the same prompt ([[PROMPT]])."
    ),
    "t2v": (
        'As a professional "Text-to-Video" quality inspector, you assess the quality of two '
        "videos ([[RESPONSE A]] and [[RESPONSE B]]), each given as frames sampled from it, "
        "generated from the same prompt ([[PROMPT]])."
    ),
    "t2a": (
        'As a professional "Text-to-Audio" quality inspector, you assess the quality of two '
        "audio clips ([[RESPONSE A]] and [[RESPONSE B]]) generated from the same prompt "
        "([[PROMPT]])."
    ),
    "t23d": (
        'As a professional "Text-to-3D" quality inspector, you score the answers of other AI '
        "assistants to a text-to-3D generation task against a given criterion. You are given a "
        "user instruction ([[PROMPT]]) and two responses ([[RESPONSE A]] and [[RESPONSE B]]), "
        "each showing renderings of a 3D object."
    ),
    "ti2i": (
        "You are a helpful assistant who scores the answers of other AI assistants to an "
        "image-editing task against a given criterion. You are given one user prompt with the "
        "image to be edited ([[PROMPT]]) and two resulting images ([[RESPONSE A]] and "
        "[[RESPONSE B]]) produced by two image-editing models."
    ),
}
# Arbiter's rubric families that stand for an Omni-RewardBench task when the slug is not one.
_OMNI_TASK_OF_FAMILY = {"t2i": "t2i", "edit": "ti2i"}
# Omni-RewardBench always has a criterion; a pair without one is judged by this.
OMNI_GENERAL_CRITERION = "The overall quality of the response and how well it fulfils the prompt."


def omni_task(task: str) -> str:
    """The Omni-RewardBench task whose introduction a pair of ``task`` gets: the slug itself
    (t2t, ti2t, tv2t, ta2t, t2i, t2v, t2a, t23d, ti2i), else by the rubric family (t2i,
    edit), else t2t."""
    slug = (task or "").strip().lower()
    if slug in OMNI_INTRODUCTIONS:
        return slug
    return _OMNI_TASK_OF_FAMILY.get(task_family(slug), "t2t")


# The order in which Omni-RewardBench's released script for a task shows the pair, in
# Arbiter's terms (AB: response1, the pair's A, first). Every task's run_exp.py branch shows
# response1 first; run_exp_t2a.py joins the two clips into one with response2's first and maps
# the verdict back, so its one answer per pair is the answer with B shown first.
_OMNI_ORDER_OF_TASK = {"t2a": "BA"}


def omni_order(task: str) -> str:
    """The order (``AB`` or ``BA``) whose answer is a pair's one prediction in
    Omni-RewardBench's scoring: ``BA`` for text-to-audio (``t2a``), ``AB`` for the others."""
    slug = (task or "").strip().lower()
    return _OMNI_ORDER_OF_TASK.get(slug, "AB")


def _omni_verdict_instruction(*, ties: bool) -> str:
    verdicts = '"[[A]]" if Response A is better, "[[B]]" if Response B is better'
    if not ties:
        return (
            "After your explanation, make a decision and give your final verdict in exactly "
            f"this format: {verdicts}."
        )
    return (
        "After your explanation, make a decision and give your final verdict in exactly this "
        f'format: {verdicts}, "[[C]]" if you cannot decide which one is better (or they are '
        'equal). Even so, avoid a "tie" where you can and be as decisive as possible.'
    )


_OMNI_TEMPLATE = (
    "{rubric}\n\n"
    "Rate the quality of the responses according to this criterion:\n\n{criteria}\n\n"
    "Your judgement should reflect the quality of the responses with respect to this "
    "criterion only, setting aside other aspects of the answers (such as overall quality), "
    "and should agree with the judgement of a reasonable human evaluator.\n\n"
    "The responses are in random order: do not let their order bias your answer. Be as "
    "objective as possible.\n\n"
    "Begin by carefully analysing the criterion and the responses and explain your "
    "reasoning. {answer_format}\n\n"
    "[[PROMPT]]\n{prompt}\n[[END OF PROMPT]]\n"
    "[[RESPONSE A]]\n{response_1}\n[[END OF RESPONSE A]]\n"
    "[[RESPONSE B]]\n{response_2}\n[[END OF RESPONSE B]]"
)

# Omni-RewardBench's text-to-audio script (evaluation_experiments/run_exp_t2a.py) sends the
# two clips as ONE audio input (annotation.media.judge_parts.audio_pair_input: the clip shown
# first, a second of silence, the clip shown second), before the prompt as text. A pair whose
# responses are one audio clip each is sent that way under the Omni-RewardBench presets: the
# template says where each response is, and {responses} stands for the joined clip.
AUDIO_PAIR = "audio_pair"
_OMNI_T2A_TEMPLATE = (
    "{rubric}\n\n"
    "Rate the quality of the responses according to this criterion:\n\n{criteria}\n\n"
    "Your judgement should reflect the quality of the responses with respect to this "
    "criterion only, setting aside other aspects of the answers (such as overall quality), "
    "and should agree with the judgement of a reasonable human evaluator.\n\n"
    "The two responses are given as one audio clip: [[RESPONSE A]] first, then one second "
    "of silence, then [[RESPONSE B]]. They are in random order: do not let their order bias "
    "your answer. Be as objective as possible.\n\n"
    "Begin by carefully analysing the criterion and the responses and explain your "
    "reasoning. {answer_format}\n\n"
    "{responses}"
    "[[PROMPT]]\n{prompt}\n[[END OF PROMPT]]"
)

PRESETS = {
    "arbiter": Preset(
        _SECTIONS + "{criterion}{answer_format}",
        ARBITER_FORMAT,
        "Arbiter's prompt: rubric, prompt, both responses, criterion, JSON with better/confidence",
    ),
    "mmrb2": Preset(
        _SECTIONS + "{criterion}Compare the two responses carefully and decide which one is better "
        "overall. Choose between {scale}. Do not let the order of the responses, their "
        "length or their style sway you.\n\n{answer_format}",
        MMRB2_FORMAT,
        "MMRB2-style pairwise prompt: answers carry better_response and a 1-6 score",
    ),
    "omni": Preset(
        _OMNI_TEMPLATE,
        OMNI_FORMAT,
        "Omni-RewardBench's task prompt without ties: verdict [[A]] or [[B]]",
        rubric_source="omni",
    ),
    "omni-ties": Preset(
        _OMNI_TEMPLATE,
        OMNI_TIES_FORMAT,
        "Omni-RewardBench's task prompt with ties: verdict [[A]], [[B]] or [[C]] (tie)",
        rubric_source="omni",
    ),
}
DEFAULT_PRESET = "arbiter"


class TemplateError(ValueError):
    """A prompt template that cannot be used; the message says why."""


def template_fields(template: str) -> list[str]:
    """The placeholders ``template`` uses, in order; TemplateError for an unknown one, a
    stray brace, a format spec or a missing required placeholder."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(f"{exc}; write a literal brace as {{{{ or }}}}") from None
    fields = []
    allowed = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise TemplateError(f"unknown placeholder {{{name}}}; use {allowed}")
        if spec or conversion:
            raise TemplateError(f"placeholder {{{name}}} takes no format or conversion")
        fields.append(name)
    if missing := [name for name in REQUIRED_PLACEHOLDERS if name not in fields]:
        raise TemplateError(
            "the template must place " + ", ".join(f"{{{name}}}" for name in missing)
        )
    return fields


@dataclass(frozen=True)
class PromptSpec:
    """What a judge's options say about its prompt: the template and the answer format."""

    template: str
    answer_format: str
    rubric_source: str = "family"

    @classmethod
    def from_options(cls, options: dict) -> PromptSpec:
        """``options.prompt`` (a preset), ``options.prompt_template`` (own text, replacing the
        preset's) and ``options.answer_format`` (default: the preset's)."""
        preset = PRESETS[options.get("prompt") or DEFAULT_PRESET]
        return cls(
            options.get("prompt_template") or preset.template,
            options.get("answer_format") or preset.answer_format,
            preset.rubric_source,
        )


def build_prompt(
    item: JudgeItem,
    *,
    rubrics: dict[str, str] | None = None,
    spec: PromptSpec | None = None,
) -> list[dict]:
    """The judge's message as content parts (``text`` parts, and ``image``, ``video``,
    ``audio``, ``model3d`` parts by hash), rendered from the template; consecutive text
    merged, no blank line beside a media part."""
    spec = spec or PromptSpec.from_options({})
    template = spec.template
    contents: dict[str, list[dict]] = {
        "prompt": item.prompt,
        "response_1": item.first,
        "response_2": item.second,
    }
    if _joined_audio(item, spec):
        template = _OMNI_T2A_TEMPLATE
        media = [_only_audio(item.first), _only_audio(item.second)]
        contents["responses"] = [{"type": AUDIO_PAIR, "media": media}]
    family = task_family(item.task)
    default_rubric = (
        OMNI_INTRODUCTIONS[omni_task(item.task)]
        if spec.rubric_source == "omni"
        else RUBRICS[family]
    )
    rubric = (rubrics or {}).get(family) or default_rubric
    criterion = (
        f"{CRITERION_HEADER}\nJudge only by this criterion: {item.criterion}\n\n"
        if item.criterion
        else ""
    )
    texts = {
        "rubric": rubric,
        "criterion": criterion,
        "criteria": item.criterion or OMNI_GENERAL_CRITERION,
        "scale": scale_words(allow_tie=item.allow_tie, answer_format=spec.answer_format),
        "answer_format": answer_instruction(
            allow_tie=item.allow_tie, answer_format=spec.answer_format
        ),
    }
    parts: list[dict] = []

    def text(value: str) -> None:
        if parts and parts[-1]["type"] == "text":
            parts[-1]["text"] += value
        else:
            parts.append({"type": "text", "text": value})

    for literal, name, _, _ in string.Formatter().parse(template):
        text(literal)
        if name in texts:
            text(texts[name])
        elif name in contents:
            previous_text = False
            for part in contents[name]:
                if part["type"] in (*MEDIA_PART_TYPES, AUDIO_PAIR):
                    parts.append({"type": part["type"], "media": part["media"]})
                    previous_text = False
                else:
                    text(("\n" if previous_text else "") + part.get("text", ""))
                    previous_text = True
    for index, part in enumerate(parts):
        if part["type"] != "text":
            continue
        if index + 1 < len(parts) and parts[index + 1]["type"] != "text":
            part["text"] = part["text"].rstrip("\n")
        if index > 0 and parts[index - 1]["type"] != "text":
            part["text"] = part["text"].lstrip("\n")
    return [part for part in parts if part["type"] != "text" or part["text"]]


def _only_audio(content: list[dict]) -> str | None:
    """The hash of ``content``'s one audio part when it holds nothing else (empty text
    aside), else None."""
    parts = [p for p in content if p.get("type") != "text" or p.get("text", "").strip()]
    if len(parts) == 1 and parts[0].get("type") == "audio":
        return parts[0]["media"]
    return None


def _joined_audio(item: JudgeItem, spec: PromptSpec) -> bool:
    """Whether the pair goes as one joined clip: a text-to-audio pair whose responses are one
    audio clip each, under an Omni-RewardBench preset's own template."""
    return (
        spec.rubric_source == "omni"
        and spec.template == _OMNI_TEMPLATE
        and omni_task(item.task) == "t2a"
        and _only_audio(item.first) is not None
        and _only_audio(item.second) is not None
    )
