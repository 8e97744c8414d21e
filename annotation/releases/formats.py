"""How one pair is written in a release (docs/releases.md, "Data files"): the TRL-ready row
of the data files and the MMRB2 record, from the pair's stored content."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from annotation.models import Side

IMAGES_DIR = "images"


@dataclass(slots=True)
class ReleaseResponse:
    """One response as the release writes it."""

    model_name: str
    content: list[dict]


@dataclass(slots=True)
class ReleasePair:
    """A selected pair with what its row needs, read from the database (``rows``);
    ``raters[i]`` gave ``votes[i]`` (annotator ids, -N for the import's "prior #N")."""

    pk: int
    raters: list[int]
    external_id: str
    task: str
    criterion: str
    prompt: list[dict]
    response_a: ReleaseResponse
    response_b: ReleaseResponse
    label: str
    votes: list[int]
    agreement: float | None
    source: str
    ensemble_label: str
    ensemble_agreement: float | None
    ensemble_summary: dict
    # Prior ratings of each response (MMRB2's reasoning file), as MMRB2 writes them.
    ratings: dict[str, list[str]] | None = None


def image_path(file_name: str) -> str:
    return f"{IMAGES_DIR}/{file_name}"


def _message(
    role: str, parts: Sequence[Mapping], files: Mapping[str, str], multimodal: bool
) -> tuple[dict, list[str]]:
    """A TRL message from content parts, and the image paths of its placeholders in order.
    Text-only releases get a string content; others a list of text parts and image
    placeholders (one schema: the placeholder's ``text`` is None)."""
    if not multimodal:
        text = "\n\n".join(part["text"] for part in parts if part["type"] == "text")
        return {"role": role, "content": text}, []
    content, images = [], []
    for part in parts:
        if part["type"] == "image":
            content.append({"type": "image", "text": None})
            images.append(image_path(files[part["media"]]))
        else:
            content.append({"type": "text", "text": part["text"]})
    return {"role": role, "content": content}, images


def trl_row(pair: ReleasePair, *, files: Mapping[str, str], multimodal: bool) -> dict[str, Any]:
    """The pair's row of ``data/<split>.{parquet,jsonl}``: chosen is A for a tie, the
    imported order. ``files`` maps an image's media hash to its file name in the release."""
    chosen, rejected = (
        (pair.response_b, pair.response_a)
        if pair.label == Side.B
        else (pair.response_a, pair.response_b)
    )
    prompt, images = _message("user", pair.prompt, files, multimodal)
    chosen_message, chosen_images = _message("assistant", chosen.content, files, multimodal)
    rejected_message, rejected_images = _message("assistant", rejected.content, files, multimodal)
    return {
        "id": pair.external_id,
        "prompt": [prompt],
        "chosen": [chosen_message],
        "rejected": [rejected_message],
        "images": images,
        "chosen_images": chosen_images,
        "rejected_images": rejected_images,
        "task": pair.task,
        "criterion": pair.criterion,
        "chosen_model": chosen.model_name,
        "rejected_model": rejected.model_name,
        "label": pair.label,
        "votes": pair.votes,
        "agreement": pair.agreement,
        "source": pair.source,
        "ensemble_label": pair.ensemble_label,
        "ensemble_agreement": pair.ensemble_agreement,
        "ensemble_summary": (
            orjson.dumps(pair.ensemble_summary, option=orjson.OPT_SORT_KEYS).decode()
            if pair.ensemble_summary
            else ""
        ),
        "prior_ratings": (
            orjson.dumps(pair.ratings, option=orjson.OPT_SORT_KEYS).decode() if pair.ratings else ""
        ),
    }


def _mmrb2_content(parts: Sequence[Mapping], files: Mapping[str, str]) -> list[list[str]]:
    return [
        ["image", image_path(files[part["media"]])]
        if part["type"] == "image"
        else ["text", part["text"]]
        for part in parts
    ]


def mmrb2_record(pair: ReleasePair, *, files: Mapping[str, str]) -> dict[str, Any]:
    """The pair in MMRB2's format (docs/import-format.md), which Arbiter imports back."""
    return {
        "id": pair.external_id,
        "task": pair.task,
        "prompt_content": _mmrb2_content(pair.prompt, files),
        "response_a": {
            "model_name": pair.response_a.model_name,
            "response_content": _mmrb2_content(pair.response_a.content, files),
        },
        "response_b": {
            "model_name": pair.response_b.model_name,
            "response_content": _mmrb2_content(pair.response_b.content, files),
        },
        "criterion": pair.criterion,
        # MMRB2's reasoning file gives per-response ratings here instead of votes.
        "human_annotations": pair.votes or pair.ratings or [],
        "chosen": pair.label,
        **({"prior_ratings": pair.ratings} if pair.votes and pair.ratings else {}),
    }
