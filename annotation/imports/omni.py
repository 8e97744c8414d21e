"""Omni-RewardBench's task files, read as they are (docs/import-format.md, "Omni-RewardBench").

Each task ships one JSON list, ``<task>_preferences.json``, of records with ``id``, ``prompt``,
``response1``/``response2`` (text, or a media path) or ``response1_path``/``response2_path``,
``model1``/``model2``, ``criteria``, ``criteria_preference`` (``response1``, ``response2`` or
``tie``) and the prompt's media (``image``/``image_path``, ``video``, ``audio``/``audio_path``).
Each record becomes a pair of the import format: the task from the file name (the paper's
short names), the criterion from ``criteria``, and ``criteria_preference`` as the pair's
reference label (``chosen``); media paths are relative to the media folder. The benchmark's
ids are unique within a task, not across its nine files, so a pair's id is ``<task>/<id>``
(``t2a/12``), the record's own id kept in the pair's metadata as ``omni_id``.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from annotation.imports.validate import AUDIO, IMAGE, MODEL3D, TEXT, VIDEO

# File stem (without "_preferences") -> the paper's task name, and the kind of its responses.
OMNI_TASKS: dict[str, tuple[str, str]] = {
    "text_to_text": ("t2t", TEXT),
    "text_image_to_text": ("ti2t", TEXT),
    "text_video_to_text": ("tv2t", TEXT),
    "text_audio_to_text": ("ta2t", TEXT),
    "text_to_image": ("t2i", IMAGE),
    "text_to_video": ("t2v", VIDEO),
    "text_to_audio": ("t2a", AUDIO),
    "text_to_3d": ("t23d", MODEL3D),
    "text_image_to_image": ("ti2i", IMAGE),
}
_RESPONSE_KIND = {task: kind for task, kind in OMNI_TASKS.values()}
_FILE_NAME = re.compile(r"^(?P<stem>[a-z0-9_]+?)_preferences\.jsonl?$")
_PREFERENCES = {"response1": "A", "response2": "B", "tie": "tie"}
# Fields consumed into the pair; any other field is kept in the pair's metadata.
_CONSUMED = {
    "id", "prompt", "response1", "response2", "response1_path", "response2_path",
    "model1", "model2", "criteria", "criteria_preference", "image", "image_path", "video",
    "video_path", "audio", "audio_path",
}  # fmt: skip
_MARKERS = {"criteria_preference", "response1", "response1_path"}
# The metadata key that keeps a record's own id (its pair's id is "<task>/<id>").
OMNI_ID = "omni_id"
_EXTENSION_KIND = {
    ".jpg": IMAGE, ".jpeg": IMAGE, ".png": IMAGE, ".webp": IMAGE, ".gif": IMAGE,
    ".mp4": VIDEO, ".webm": VIDEO, ".mov": VIDEO, ".avi": VIDEO, ".mkv": VIDEO,
    ".wav": AUDIO, ".mp3": AUDIO, ".flac": AUDIO, ".ogg": AUDIO, ".m4a": AUDIO,
    ".glb": MODEL3D,
}  # fmt: skip


def omni_task(file_name: str) -> str | None:
    """The task of an Omni-RewardBench file by its name (``text_to_video_preferences.json``
    is ``t2v``), or None for any other file."""
    match = _FILE_NAME.match(PurePosixPath(file_name).name.lower())
    if match is None:
        return None
    entry = OMNI_TASKS.get(match["stem"])
    return entry[0] if entry else None


def omni_record(data: Any, *, task: str | None) -> dict | None:
    """``data`` as a pair of the import format, when it is an Omni-RewardBench record (it has
    ``criteria_preference`` or ``response1``); None otherwise, and it is read as it is."""
    if not isinstance(data, dict) or not _MARKERS & data.keys():
        return None
    task = task or (data.get("task") if isinstance(data.get("task"), str) else None)
    response_kind = _RESPONSE_KIND.get(task or "")
    pair: dict[str, Any] = {key: value for key, value in data.items() if key not in _CONSUMED}
    pair["id"] = data.get("id")
    if response_kind is not None and _is_id(pair["id"]):
        # Ids repeat across the benchmark's task files: the task makes them unique.
        pair[OMNI_ID] = pair["id"]
        pair["id"] = omni_pair_id(task or "", pair["id"])
    if task:
        pair["task"] = task
    pair["prompt_content"] = _prompt(data)
    for side, number in (("response_a", "1"), ("response_b", "2")):
        pair[side] = {
            "model_name": data.get(f"model{number}"),
            "response_content": _response(data, number, response_kind),
        }
    if data.get("criteria") is not None:
        pair["criterion"] = data["criteria"]
    preference = data.get("criteria_preference")
    if preference is not None:
        key = preference.strip().lower() if isinstance(preference, str) else preference
        pair["chosen"] = _PREFERENCES.get(key, preference)
    return pair


def omni_pair_id(task: str, record_id: str | int) -> str:
    """The id of the pair a record of ``task`` with ``record_id`` becomes: ``t2a/12``."""
    return f"{task}/{record_id}"


def omni_record_id(task: str, external_id: str) -> str:
    """The benchmark's own id of a pair of ``task``: its id without the ``<task>/`` an
    Omni-RewardBench import put before it (any other id as it is)."""
    return external_id.removeprefix(f"{task}/")


def _is_id(value: Any) -> bool:
    """An id the import format takes (a string or an integer, not empty); anything else is
    left for its own check to refuse."""
    return not isinstance(value, bool) and isinstance(value, str | int) and value != ""


def _prompt(data: dict) -> list | Any:
    parts: list = []
    for kind, keys in ((IMAGE, ("image_path", "image")), (VIDEO, ("video_path", "video")),
                       (AUDIO, ("audio_path", "audio"))):  # fmt: skip
        for path in _paths(_first(data, keys)):
            parts.append([kind, path])
    prompt = data.get("prompt")
    if prompt is None:
        return parts or None
    if not isinstance(prompt, str):
        return prompt  # refused by the import format's own check, with its field
    return [*parts, [TEXT, prompt]]


def _response(data: dict, number: str, kind: str | None) -> Any:
    path_value = data.get(f"response{number}_path")
    value = path_value if path_value is not None else data.get(f"response{number}")
    if value is None:
        return None
    if kind == TEXT or (kind is None and path_value is None):
        return value  # text (a string), checked by the import format
    paths = _paths(value)
    if not paths:
        return value
    return [[_kind_of(path, kind), path] for path in paths]


def _kind_of(path: str, task_kind: str | None) -> str:
    by_extension = _EXTENSION_KIND.get(PurePosixPath(path).suffix.lower())
    if task_kind == MODEL3D:
        # A 3D response is a .glb, or its rendered views (images), as the benchmark ships it.
        return MODEL3D if by_extension == MODEL3D else IMAGE
    return task_kind or by_extension or IMAGE


def _first(data: dict, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if data.get(key) not in (None, ""):
            return data[key]
    return None


def _paths(value: Any) -> list[str]:
    if isinstance(value, dict) and isinstance(value.get("path"), str):
        value = value["path"]  # a `datasets` Image or Audio value exported as JSON
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return list(value)
    return []
