"""Judge prompts in MMRB2's style: a rubric for the task's family, the prompt, the two
responses in the order shown, the criterion if any, and a request for a JSON answer."""

from __future__ import annotations

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


def answer_instruction(*, allow_tie: bool) -> str:
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


def build_prompt(item: JudgeItem, *, rubrics: dict[str, str] | None = None) -> list[dict]:
    """The judge's message as content parts (``text`` parts and ``image`` parts by hash),
    consecutive text merged."""
    family = task_family(item.task)
    rubric = (rubrics or {}).get(family) or RUBRICS[family]
    parts: list[dict] = []

    def text(value: str) -> None:
        if parts and parts[-1]["type"] == "text":
            parts[-1]["text"] += "\n" + value
        else:
            parts.append({"type": "text", "text": value})

    def content(value: list[dict]) -> None:
        for part in value:
            if part["type"] == "image":
                parts.append({"type": "image", "media": part["media"]})
            else:
                text(part.get("text", ""))

    text(rubric + "\n")
    text(PROMPT_HEADER)
    content(item.prompt)
    text(END_OF_PROMPT + "\n")
    for number, response in ((1, item.first), (2, item.second)):
        text(response_header(number))
        content(response)
        text(response_footer(number) + "\n")
    if item.criterion:
        text(f"{CRITERION_HEADER}\nJudge only by this criterion: {item.criterion}\n")
    text(answer_instruction(allow_tie=item.allow_tie))
    return parts
