"""How one pair is written in a release (docs/releases.md, "Data files"): the TRL-ready row
of the data files and the MMRB2 record, from the pair's stored content."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

import orjson

from annotation.core.errors import InvalidInput
from annotation.models import Side

IMAGES_DIR = "images"
# Where each kind of media file lives in a release, named by the sha256 of its bytes; and
# the columns listing a message's files of that kind (``images``, ``chosen_videos``, ...).
MEDIA_DIRS = {"image": IMAGES_DIR, "video": "videos", "audio": "audio", "model3d": "models"}
MEDIA_COLUMNS = {"image": "images", "video": "videos", "audio": "audios", "model3d": "models3d"}
# The kinds beyond images, in the order of their columns (a release has the columns of the
# kinds its project holds: docs/releases.md, "Video, audio and 3D").
AV_KINDS = ("video", "audio", "model3d")
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


# The part kinds a release writes; a build meeting any other fails naming the pair instead of
# leaving the part out of a row.
RELEASED_PART_TYPES = frozenset({"text", *MEDIA_DIRS})


def check_released_parts(pair: ReleasePair) -> None:
    for content in (pair.prompt, pair.response_a.content, pair.response_b.content):
        for part in content:
            if part["type"] not in RELEASED_PART_TYPES:
                _refuse_parts(pair)


def _refuse_parts(pair: ReleasePair) -> None:
    kinds = {
        part["type"]
        for content in (pair.prompt, pair.response_a.content, pair.response_b.content)
        for part in content
    }
    if not kinds <= RELEASED_PART_TYPES:
        kinds -= RELEASED_PART_TYPES
        raise InvalidInput(
            f"pair {pair.external_id} has {', '.join(sorted(kinds))} parts, which releases do "
            "not carry: leave its task out of the selection"
        )


# A message's files in the release, by kind.
MessageFiles = Mapping[str, Sequence[str]]
# A text-only message's files: none of any kind (``_add_media`` copies each into a new list).
_NO_MEDIA: MessageFiles = MappingProxyType({kind: () for kind in MEDIA_DIRS})


def _message(
    role: str, parts: Sequence[Mapping], files: Mapping[str, str], multimodal: bool
) -> tuple[dict, MessageFiles]:
    """A TRL message from content parts, and the release paths of its placeholders' files in
    order, by kind. Text-only releases get a string content; others a list of text parts and
    ``{"type": "image"}`` (``video``, ``audio``, ``model3d``) placeholders (one schema: the
    placeholder's ``text`` is None). ``files`` maps a media hash to its path in the release."""
    if not multimodal:
        text = "\n\n".join([part["text"] for part in parts if part["type"] == "text"])
        return {"role": role, "content": text}, _NO_MEDIA
    media: dict[str, list[str]] = {kind: [] for kind in MEDIA_DIRS}
    content = []
    for part in parts:
        if part["type"] in MEDIA_DIRS:
            content.append({"type": part["type"], "text": None})
            media[part["type"]].append(files[part["media"]])
        else:
            content.append({"type": "text", "text": part["text"]})
    return {"role": role, "content": content}, media


# The labels as plain strings: a row is built per pair, and each lookup of an enum member
# on its class costs more than the comparison.
_A, _B, _TIE = Side.A.value, Side.B.value, Side.TIE.value


def _add_ensemble(row: dict[str, Any], pair: ReleasePair) -> dict[str, Any]:
    """The row's label columns, after its others."""
    row["preferred_side"] = pair.label
    row["votes"] = pair.votes
    row["agreement"] = pair.agreement
    row["source"] = pair.source
    row["ensemble_label"] = pair.ensemble_label
    row["ensemble_agreement"] = pair.ensemble_agreement
    row["ensemble_summary"] = (
        orjson.dumps(pair.ensemble_summary, option=orjson.OPT_SORT_KEYS).decode()
        if pair.ensemble_summary
        else ""
    )
    row["prior_ratings"] = (
        orjson.dumps(pair.ratings, option=orjson.OPT_SORT_KEYS).decode() if pair.ratings else ""
    )
    return row


def trl_row(
    pair: ReleasePair,
    *,
    files: Mapping[str, str],
    multimodal: bool,
    av_kinds: Sequence[str] = (),
) -> dict[str, Any]:
    """The pair's row of ``data/<split>.{parquet,jsonl}``: a preference, A or B (ties have
    rows of their own, ``tie_row``). ``files`` maps a media hash to its path in the release;
    ``av_kinds`` are the kinds beyond images whose columns the release has."""
    if pair.label == _TIE:
        raise ValueError(f"pair {pair.external_id} is a tie: it has no chosen response")
    chosen, rejected = (
        (pair.response_b, pair.response_a)
        if pair.label == _B
        else (pair.response_a, pair.response_b)
    )
    prompt, media = _message("user", pair.prompt, files, multimodal)
    chosen_message, chosen_media = _message("assistant", chosen.content, files, multimodal)
    rejected_message, rejected_media = _message("assistant", rejected.content, files, multimodal)
    row = {
        "id": pair.external_id,
        "prompt": [prompt],
        "chosen": [chosen_message],
        "rejected": [rejected_message],
    }
    _add_media(row, (media, chosen_media, rejected_media), _media_columns(_CHOSEN, tuple(av_kinds)))
    row["task"] = pair.task
    row["criterion"] = pair.criterion
    row["chosen_model"] = chosen.model_name
    row["rejected_model"] = rejected.model_name
    return _add_ensemble(row, pair)


_CHOSEN, _RESPONSES = ("chosen_", "rejected_"), ("response_a_", "response_b_")


@cache
def _media_columns(
    prefixes: tuple[str, str], av_kinds: tuple[str, ...]
) -> tuple[tuple[str, tuple[str, str, str]], ...]:
    """Each media kind's three columns (the prompt's, then each response's): the images
    first, then each other kind the release has (``videos``, ``chosen_videos``, ...)."""
    first, second = prefixes
    names = [(kind, MEDIA_COLUMNS[kind]) for kind in ("image", *av_kinds)]
    return tuple((kind, (name, f"{first}{name}", f"{second}{name}")) for kind, name in names)


def _add_media(
    row: dict[str, Any],
    messages: tuple[MessageFiles, MessageFiles, MessageFiles],
    columns: tuple[tuple[str, tuple[str, str, str]], ...],
) -> None:
    """The media columns of a row: the files of the prompt and of each response, by kind, in
    ``_media_columns``' order."""
    prompt, first, second = messages
    for kind, (prompt_column, first_column, second_column) in columns:
        row[prompt_column] = list(prompt[kind])
        row[first_column] = list(first[kind])
        row[second_column] = list(second[kind])


def tie_row(
    pair: ReleasePair,
    *,
    files: Mapping[str, str],
    multimodal: bool,
    av_kinds: Sequence[str] = (),
) -> dict[str, Any]:
    """A tie's row of ``ties/<split>.parquet``: the two responses as ``response_a`` and
    ``response_b``, never ``chosen``/``rejected``, so no preference trainer reads a preference
    nobody expressed."""
    prompt, media = _message("user", pair.prompt, files, multimodal)
    message_a, media_a = _message("assistant", pair.response_a.content, files, multimodal)
    message_b, media_b = _message("assistant", pair.response_b.content, files, multimodal)
    row = {
        "id": pair.external_id,
        "prompt": [prompt],
        "response_a": [message_a],
        "response_b": [message_b],
    }
    _add_media(row, (media, media_a, media_b), _media_columns(_RESPONSES, tuple(av_kinds)))
    row["task"] = pair.task
    row["criterion"] = pair.criterion
    row["model_a"] = pair.response_a.model_name
    row["model_b"] = pair.response_b.model_name
    return _add_ensemble(row, pair)


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
        "input_images": [files[part["media"]] for part in pair.prompt if part["type"] == "image"],
        "jpg_0": files[image_a["media"]],
        "jpg_1": files[image_b["media"]],
        "label_0": 1.0 if won_a else 0.0,
        "label_1": 0.0 if won_a else 1.0,
        "task": pair.task,
        "criterion": pair.criterion,
        "model_0": pair.response_a.model_name,
        "model_1": pair.response_b.model_name,
        "agreement": pair.agreement,
        "source": pair.source,
    }


def table_rows(
    pair: ReleasePair,
    *,
    files: Mapping[str, str],
    multimodal: bool,
    av_kinds: Sequence[str] = (),
) -> dict[str, dict[str, Any] | None]:
    """The pair's row in each config: a preference or a tie, and, for image-output pairs of
    a release with images, the image-preference row."""
    check_released_parts(pair)
    tie = pair.label == _TIE
    row = (tie_row if tie else trl_row)(pair, files=files, multimodal=multimodal, av_kinds=av_kinds)
    rows = {DEFAULT_CONFIG: None if tie else row, TIES_CONFIG: row if tie else None}
    if multimodal:
        rows[IMAGE_PREFERENCE_CONFIG] = image_preference_row(pair, files=files)
    return rows


def _mmrb2_content(parts: Sequence[Mapping], files: Mapping[str, str]) -> list[list[str]]:
    return [
        [part["type"], files[part["media"]]]
        if part["type"] in MEDIA_DIRS
        else ["text", part["text"]]
        for part in parts
    ]


def mmrb2_record(pair: ReleasePair, *, files: Mapping[str, str]) -> dict[str, Any]:
    """The pair in MMRB2's format (docs/import-format.md), which Arbiter imports back."""
    record = {
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
    }
    if pair.votes and pair.ratings:
        record["prior_ratings"] = pair.ratings
    return record
