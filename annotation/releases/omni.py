"""The Omni-RewardBench-compatible files of a release (docs/releases.md, "Omni-RewardBench-
compatible files"): the pairs of each of the benchmark's nine tasks as that task's file,
``omni/<split>/<task>_preferences.json``, with the fields its README lists, which Arbiter's
own import (``annotation/imports/omni.py``) reads back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from annotation.imports.omni import OMNI_TASKS, omni_record_id
from annotation.models import Side
from annotation.releases.formats import ReleasePair

OMNI_DIR = "omni"
# The paper's task name -> its file's name, and the kind of its responses.
OMNI_FILES = {task: (f"{stem}_preferences.json", kind) for stem, (task, kind) in OMNI_TASKS.items()}
_PREFERENCES: dict[str, str] = {Side.A: "response1", Side.B: "response2", Side.TIE: "tie"}
# The prompt's media fields, by kind (the names the benchmark's files use).
_PROMPT_FIELDS = {"image": "image", "video": "video", "audio": "audio"}


def omni_file(split: str, task: str) -> str:
    return f"{OMNI_DIR}/{split}/{OMNI_FILES[task][0]}"


def _visible(parts: Sequence[Mapping]) -> list[Mapping]:
    """The parts that count: blank text (an importer's filler) aside."""
    return [part for part in parts if part["type"] != "text" or part["text"].strip()]


def _one_or_list(paths: list[str]) -> str | list[str]:
    return paths[0] if len(paths) == 1 else paths


def _response(parts: Sequence[Mapping], kind: str, files: Mapping[str, str]) -> Any:
    """A response as the task's files hold it: its text for text-output tasks, its media
    path (a list for several, a 3D model's rendered views) otherwise; None when it does not
    fit (a text answer with an image in it, a video task answered in text)."""
    parts = _visible(parts)
    if kind == "text":
        if parts and all(part["type"] == "text" for part in parts):
            return "\n\n".join(part["text"] for part in parts)
        return None
    allowed = {"image", "model3d"} if kind == "model3d" else {kind}
    if parts and all(part["type"] in allowed for part in parts):
        return _one_or_list([files[part["media"]] for part in parts])
    return None


def omni_record(pair: ReleasePair, *, files: Mapping[str, str]) -> dict[str, Any] | None:
    """The pair as a record of its task's Omni-RewardBench file, or None when its task is not
    one of the benchmark's nine or its content does not fit that task's fields (the MMRB2
    file holds every pair). ``files`` maps a media hash to its path in the release."""
    if pair.task not in OMNI_FILES or pair.label not in _PREFERENCES:
        return None
    kind = OMNI_FILES[pair.task][1]
    responses = [
        _response(response.content, kind, files) for response in (pair.response_a, pair.response_b)
    ]
    if any(response is None for response in responses):
        return None
    prompt = _visible(pair.prompt)
    if any(part["type"] not in ("text", *_PROMPT_FIELDS) for part in prompt):
        return None
    # The benchmark's own id: an imported task file's pair is "<task>/<id>".
    record: dict[str, Any] = {"id": omni_record_id(pair.task, pair.external_id)}
    texts = [part["text"] for part in prompt if part["type"] == "text"]
    if texts:
        record["prompt"] = "\n\n".join(texts)
    for media_kind, name in _PROMPT_FIELDS.items():
        paths = [files[part["media"]] for part in prompt if part["type"] == media_kind]
        if paths:
            record[name] = _one_or_list(paths)
    suffix = "" if kind == "text" else "_path"
    record[f"response1{suffix}"], record[f"response2{suffix}"] = responses
    record["model1"] = pair.response_a.model_name
    record["model2"] = pair.response_b.model_name
    record["criteria"] = pair.criterion
    record["criteria_preference"] = _PREFERENCES[pair.label]
    return record
