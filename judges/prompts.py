"""Judge prompts as data: a template with placeholders (a preset, or a judge's own text) and
an answer format. The presets: Arbiter's prompt in MMRB2's style (a rubric for the task's
family, the prompt, the two responses in the order shown, the criterion if any, a request for
a JSON answer) and an MMRB2-style pairwise prompt whose answer carries ``better_response`` and
a 1-6 score. See docs/judges.md, "Prompt templates"."""

from __future__ import annotations

import string
from dataclasses import dataclass

from annotation.content import MEDIA_PART_TYPES
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
ANSWER_FORMATS = (ARBITER_FORMAT, MMRB2_FORMAT)


def answer_instruction(*, allow_tie: bool, answer_format: str = ARBITER_FORMAT) -> str:
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

    @classmethod
    def from_options(cls, options: dict) -> PromptSpec:
        """``options.prompt`` (a preset), ``options.prompt_template`` (own text, replacing the
        preset's) and ``options.answer_format`` (default: the preset's)."""
        preset = PRESETS[options.get("prompt") or DEFAULT_PRESET]
        return cls(
            options.get("prompt_template") or preset.template,
            options.get("answer_format") or preset.answer_format,
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
    family = task_family(item.task)
    rubric = (rubrics or {}).get(family) or RUBRICS[family]
    criterion = (
        f"{CRITERION_HEADER}\nJudge only by this criterion: {item.criterion}\n\n"
        if item.criterion
        else ""
    )
    texts = {
        "rubric": rubric,
        "criterion": criterion,
        "scale": scale_words(allow_tie=item.allow_tie, answer_format=spec.answer_format),
        "answer_format": answer_instruction(
            allow_tie=item.allow_tie, answer_format=spec.answer_format
        ),
    }
    contents = {"prompt": item.prompt, "response_1": item.first, "response_2": item.second}
    parts: list[dict] = []

    def text(value: str) -> None:
        if parts and parts[-1]["type"] == "text":
            parts[-1]["text"] += value
        else:
            parts.append({"type": "text", "text": value})

    for literal, name, _, _ in string.Formatter().parse(spec.template):
        text(literal)
        if name in texts:
            text(texts[name])
        elif name in contents:
            previous_text = False
            for part in contents[name]:
                if part["type"] in MEDIA_PART_TYPES:
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
