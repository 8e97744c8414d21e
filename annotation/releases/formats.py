"""How one pair is written in a release (docs/releases.md, "Data files"): the TRL-ready row
of the data files and the MMRB2 record, from the pair's stored content."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from annotation.core.errors import InvalidInput
from annotation.models import Side

IMAGES_DIR = "images"
# The release's configs (docs/releases.md, "Data files"): what ``datasets.load_dataset``
# takes as ``name``. Preferences only in the default one; ties and the image-preference
# layout in their own.
DEFAULT_CONFIG = "default"
TIES_CONFIG = "ties"
IMAGE_PREFERENCE_CONFIG = "image_preference"


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


# What a release writes today; video, audio and 3D parts import and show to people, but
# their files, feature types and formats are not written yet, so a build holding one fails
# naming the pair instead of leaving the part out of a row.
RELEASED_PART_TYPES = frozenset({"text", "image"})


def check_released_parts(pair: ReleasePair) -> None:
    kinds = {
        part["type"]
        for content in (pair.prompt, pair.response_a.content, pair.response_b.content)
        for part in content
    } - RELEASED_PART_TYPES
    if kinds:
        raise InvalidInput(
            f"pair {pair.external_id} has {', '.join(sorted(kinds))} parts, which releases do "
            "not carry yet: leave its task out of the selection"
        )


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


def _provenance(pair: ReleasePair) -> dict[str, Any]:
    return {
        "task": pair.task,
        "criterion": pair.criterion,
    }


def _ensemble(pair: ReleasePair) -> dict[str, Any]:
    return {
        "preferred_side": pair.label,
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


def trl_row(pair: ReleasePair, *, files: Mapping[str, str], multimodal: bool) -> dict[str, Any]:
    """The pair's row of ``data/<split>.{parquet,jsonl}``: a preference, A or B (ties have
    rows of their own, ``tie_row``). ``files`` maps an image's media hash to its file name in
    the release."""
    if pair.label == Side.TIE:
        raise ValueError(f"pair {pair.external_id} is a tie: it has no chosen response")
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
        **_provenance(pair),
        "chosen_model": chosen.model_name,
        "rejected_model": rejected.model_name,
        **_ensemble(pair),
    }


def tie_row(pair: ReleasePair, *, files: Mapping[str, str], multimodal: bool) -> dict[str, Any]:
    """A tie's row of ``ties/<split>.parquet``: the two responses as ``response_a`` and
    ``response_b``, never ``chosen``/``rejected``, so no preference trainer reads a preference
    nobody expressed."""
    prompt, images = _message("user", pair.prompt, files, multimodal)
    message_a, images_a = _message("assistant", pair.response_a.content, files, multimodal)
    message_b, images_b = _message("assistant", pair.response_b.content, files, multimodal)
    return {
        "id": pair.external_id,
        "prompt": [prompt],
        "response_a": [message_a],
        "response_b": [message_b],
        "images": images,
        "response_a_images": images_a,
        "response_b_images": images_b,
        **_provenance(pair),
        "model_a": pair.response_a.model_name,
        "model_b": pair.response_b.model_name,
        **_ensemble(pair),
    }


def _only_image(parts: Sequence[Mapping]) -> Mapping | None:
    """The response's one image when it is an image and nothing else (blank text aside)."""
    images = [part for part in parts if part["type"] == "image"]
    texts = [part for part in parts if part["type"] == "text" and part["text"].strip()]
    return images[0] if len(images) == 1 and not texts else None


def image_preference_row(pair: ReleasePair, *, files: Mapping[str, str]) -> dict[str, Any] | None:
    """The pair's row of ``image_preference/<split>.parquet`` in the layout image-preference
    trainers read (Pick-a-Pic, Diffusion-DPO): the caption, the two images, ``label_0`` 1.0
    when the first won and 0.0 when the second did. None unless both responses are one image
    and nothing else, and the label is A or B."""
    image_a, image_b = _only_image(pair.response_a.content), _only_image(pair.response_b.content)
    if image_a is None or image_b is None or pair.label not in (Side.A, Side.B):
        return None
    won_a = pair.label == Side.A
    return {
        "id": pair.external_id,
        "caption": "\n\n".join(part["text"] for part in pair.prompt if part["type"] == "text"),
        "input_images": [
            image_path(files[part["media"]]) for part in pair.prompt if part["type"] == "image"
        ],
        "jpg_0": image_path(files[image_a["media"]]),
        "jpg_1": image_path(files[image_b["media"]]),
        "label_0": 1.0 if won_a else 0.0,
        "label_1": 0.0 if won_a else 1.0,
        **_provenance(pair),
        "model_0": pair.response_a.model_name,
        "model_1": pair.response_b.model_name,
        "agreement": pair.agreement,
        "source": pair.source,
    }


def table_rows(
    pair: ReleasePair, *, files: Mapping[str, str], multimodal: bool
) -> dict[str, dict[str, Any] | None]:
    """The pair's row in each config: a preference or a tie, and, for image-output pairs of
    a release with images, the image-preference row."""
    check_released_parts(pair)
    tie = pair.label == Side.TIE
    rows = {
        DEFAULT_CONFIG: None if tie else trl_row(pair, files=files, multimodal=multimodal),
        TIES_CONFIG: tie_row(pair, files=files, multimodal=multimodal) if tie else None,
    }
    if multimodal:
        rows[IMAGE_PREFERENCE_CONFIG] = image_preference_row(pair, files=files)
    return rows


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
