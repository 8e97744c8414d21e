"""Validation of one record of a pairs file (docs/import-format.md): the fields, parts and
prior annotations it holds, every problem collected with its field, into a ``PairSpec``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from annotation.agreement.prior_ratings import MMRB2_KEYS
from annotation.imports.errors import ImportIssue
from annotation.imports.parse import RawRecord
from annotation.models import Scale, Side

# Free-form values kept as they are (prompt_metadata, other top-level keys) may nest this
# deep; deeper ones would exhaust Python's recursion limit when encoded again later.
MAX_JSON_DEPTH = 64
MAX_ID_LENGTH = 255
MAX_NAME_LENGTH = 200
_TASK_RE = re.compile(r"^[-a-zA-Z0-9_]+$")
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
TEXT, IMAGE = "text", "image"
# Parts that name a file like an image does: a video, an audio clip, a binary glTF model.
VIDEO, AUDIO, MODEL3D = "video", "audio", "model3d"
_FILE_PARTS = (IMAGE, VIDEO, AUDIO, MODEL3D)
_KNOWN_FIELDS = {
    "id",
    "task",
    "prompt_content",
    "prompt",
    "response_a",
    "response_b",
    "criterion",
    "prompt_source",
    "prompt_metadata",
    "human_annotations",
    "chosen",
}
_RESPONSE_FIELDS = {"model_name", "model", "response_content"}
_SIDE_WORDS = {"a": Side.A, "b": Side.B, "tie": Side.TIE}
# Canonical vote values on the binary and ternary scales (see Vote.value).
_TERNARY_VALUES = {Side.B: 1, Side.TIE: 2, Side.A: 3}
_TERNARY_SIDES = {value: side for side, value in _TERNARY_VALUES.items()}
_SIDE_A, _SIDE_B = Side.A.value, Side.B.value
# MMRB2's reasoning file: human_annotations rates each response, by letter, as an object
# (annotation/agreement/prior_ratings.py).
RATING_KEYS = {key: response for response, key in MMRB2_KEYS.items()}
MAX_RATING_LENGTH = 16


@dataclass
class ResponseSpec:
    model_name: str
    parts: list[tuple[str, str]]
    field: str


@dataclass
class PairSpec:
    """A validated pair, image parts still as references (paths or URLs)."""

    line: int
    external_id: str
    task: str
    prompt_parts: list[tuple[str, str]]
    prompt_field: str
    response_a: ResponseSpec
    response_b: ResponseSpec
    criterion: str
    prompt_source: str
    prompt_metadata: dict
    extra: dict
    annotations: list[tuple[int, str]] = field(default_factory=list)
    chosen: str = ""
    # (response "A" or "B", rating as given), in the file's order: a-ratings first.
    ratings: list[tuple[str, str]] = field(default_factory=list)


def is_url(reference: str) -> bool:
    return reference.lower().startswith(("http://", "https://"))


class _Checker:
    """Validates one record, collecting every problem instead of stopping at the first."""

    def __init__(self, line: int, scale: str, allow_urls: bool):
        self.line = line
        self.scale = scale
        self.allow_urls = allow_urls
        self.issues: list[ImportIssue] = []

    def fail(self, field: str | None, message: str) -> None:
        self.issues.append(ImportIssue(self.line, field, message))

    def text(self, data: dict, key: str, *, limit: int | None = None, field: str = "") -> str:
        value = data.get(key)
        name = field or key
        if value is None:
            return ""
        if not isinstance(value, str):
            self.fail(name, f"must be a string, not {_json_type(value)}")
            return ""
        if limit is not None and len(value) > limit:
            self.fail(name, f"is longer than {limit} characters")
            return ""
        return value

    def content(self, value: Any, field: str) -> list[tuple[str, str]]:
        if isinstance(value, str):
            return [(TEXT, value)]
        if not isinstance(value, list):
            self.fail(field, f"must be a list of parts or a string, not {_json_type(value)}")
            return []
        if not value:
            self.fail(field, "must have at least one part")
            return []
        parts = []
        for index, part in enumerate(value):
            name = f"{field}[{index}]"
            if not (isinstance(part, list) and len(part) == 2 and part[0] in (TEXT, *_FILE_PARTS)):
                self.fail(
                    name,
                    'each part must be ["text", "..."] or ["image", "path or URL"] (or "video", '
                    '"audio", "model3d" with a path)',
                )
                continue
            kind, body = part
            if not isinstance(body, str):
                self.fail(name, f"the {kind} must be a string, not {_json_type(body)}")
                continue
            if kind in _FILE_PARTS:
                if not body.strip():
                    self.fail(name, f"the {kind} path is empty")
                    continue
                control = _CONTROL_CHARACTER.search(body)
                if control:
                    code = f"U+{ord(control.group()):04X}"
                    self.fail(name, f"the {kind} path contains a control character ({code})")
                    continue
                if is_url(body):
                    if not self.allow_urls:
                        self.fail(
                            name,
                            f"image URL {body[:200]!r} is not allowed: this project does not "
                            "fetch media by URL (a curator can turn on 'allow media URLs')",
                        )
                        continue
                elif "://" in body or body.lower().startswith("data:"):
                    self.fail(name, "an image is a path in the media folder or an http(s) URL")
                    continue
            parts.append((kind, body))
        return parts

    def response(self, data: dict, key: str) -> ResponseSpec:
        value = data.get(key)
        if value is None:
            self.fail(key, "missing (each pair needs response_a and response_b)")
            return ResponseSpec("", [], key)
        if not isinstance(value, dict):
            self.fail(key, f"must be an object, not {_json_type(value)}")
            return ResponseSpec("", [], key)
        for unknown in sorted(set(value) - _RESPONSE_FIELDS):
            self.fail(f"{key}.{unknown}", "unknown field (use model_name and response_content)")
        model_key = "model_name" if "model_name" in value else "model"
        model_name = self.text(
            value, model_key, limit=MAX_NAME_LENGTH, field=f"{key}.{model_key}"
        ).strip()
        field = f"{key}.response_content"
        if "response_content" not in value:
            self.fail(field, "missing")
            return ResponseSpec(model_name, [], field)
        return ResponseSpec(model_name, self.content(value["response_content"], field), field)

    def annotations(self, value: Any) -> list[tuple[int, str]]:
        if value is None or isinstance(value, dict):  # an object holds ratings
            return []
        if not isinstance(value, list):
            self.fail(
                "human_annotations",
                f"must be a list of votes or an object of ratings, not {_json_type(value)}",
            )
            return []
        out = []
        for index, item in enumerate(value):
            parsed = self.vote(item, f"human_annotations[{index}]")
            if parsed is not None:
                out.append(parsed)
        return out

    def ratings(self, value: Any) -> list[tuple[str, str]]:
        """MMRB2's per-response ratings, ``{"response_a_ratings": ["B", ...],
        "response_b_ratings": [...]}``: either list may be empty or left out."""
        if not isinstance(value, dict):
            return []
        for unknown in sorted(set(value) - set(RATING_KEYS)):
            self.fail(
                f"human_annotations.{unknown}",
                "unknown field (use response_a_ratings and response_b_ratings)",
            )
        out = []
        for key, response in RATING_KEYS.items():
            items = value.get(key)
            if items is None:
                continue
            field = f"human_annotations.{key}"
            if not isinstance(items, list):
                self.fail(field, f"must be a list of ratings, not {_json_type(items)}")
                continue
            for index, item in enumerate(items):
                if not isinstance(item, str) or not item.strip():
                    self.fail(f"{field}[{index}]", f"{_shown(item)} is not a rating (a letter)")
                elif len(item) > MAX_RATING_LENGTH:
                    self.fail(f"{field}[{index}]", f"longer than {MAX_RATING_LENGTH} characters")
                else:
                    out.append((response, item.strip()))
        return out

    def vote(self, item: Any, field: str) -> tuple[int, str] | None:
        if self.scale == Scale.LIKERT6:
            if type(item) is not int or not 1 <= item <= 6:
                self.fail(field, f"{_shown(item)} is not on this project's likert6 scale (1 to 6)")
                return None
            return item, _SIDE_A if item >= 4 else _SIDE_B
        allowed = "A, B or tie (or 3, 2, 1)" if self.scale == Scale.TERNARY else "A or B (or 3, 1)"
        side = None
        if isinstance(item, str):
            side = _SIDE_WORDS.get(item.strip().lower())
        elif type(item) is int:
            side = _TERNARY_SIDES.get(item)
        if side is None or (side == Side.TIE and self.scale == Scale.BINARY):
            self.fail(
                field, f"{_shown(item)} is not on this project's {self.scale} scale: use {allowed}"
            )
            return None
        return _TERNARY_VALUES[side], side

    def chosen(self, value: Any) -> str:
        if value is None or value == "":
            return ""
        side = _SIDE_WORDS.get(value.strip().lower()) if isinstance(value, str) else None
        if side is None:
            self.fail("chosen", f"{_shown(value)} is not one of A, B or tie")
            return ""
        if side == Side.TIE and self.scale == Scale.BINARY:
            self.fail("chosen", "tie is not possible on this project's binary scale")
            return ""
        return side


def pair_spec(
    record: RawRecord, *, scale: str, allow_urls: bool
) -> tuple[PairSpec | None, list[ImportIssue]]:
    """Checks one record against the import format; returns the pair or every problem found."""
    check = _Checker(record.line, scale, allow_urls)
    data = record.data
    if not isinstance(data, dict):
        check.fail(None, f"each pair must be a JSON object, not {_json_type(data)}")
        return None, check.issues

    raw_id = data.get("id")
    external_id = ""
    if raw_id is None or raw_id == "":
        check.fail("id", "missing (each pair needs a unique id)")
    elif isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        check.fail("id", f"must be a string or an integer, not {_json_type(raw_id)}")
    else:
        external_id = str(raw_id)
        if len(external_id) > MAX_ID_LENGTH:
            check.fail("id", f"is longer than {MAX_ID_LENGTH} characters")

    task = check.text(data, "task", limit=64).strip()
    if task and not _TASK_RE.match(task):
        check.fail("task", f"{task!r} must be a slug (letters, digits, '-' and '_')")

    if "prompt_content" in data and "prompt" in data:
        check.fail("prompt", "give prompt_content or prompt, not both")
    prompt_field = "prompt_content" if "prompt_content" in data else "prompt"
    prompt_parts: list[tuple[str, str]] = []
    if data.get(prompt_field) is None:
        check.fail("prompt_content", "missing (the prompt, as prompt_content or prompt)")
    else:
        prompt_parts = check.content(data[prompt_field], prompt_field)

    response_a = check.response(data, "response_a")
    response_b = check.response(data, "response_b")
    criterion = check.text(data, "criterion")
    prompt_source = check.text(data, "prompt_source", limit=MAX_NAME_LENGTH)
    prompt_metadata = data.get("prompt_metadata") or {}
    if not isinstance(prompt_metadata, dict):
        check.fail("prompt_metadata", f"must be an object, not {_json_type(prompt_metadata)}")
        prompt_metadata = {}
    extra = {key: value for key, value in data.items() if key not in _KNOWN_FIELDS}
    for name, value in (("prompt_metadata", prompt_metadata), *extra.items()):
        if _nested_deeper_than(value, MAX_JSON_DEPTH):
            check.fail(name, f"is nested more than {MAX_JSON_DEPTH} levels deep")
    annotations = check.annotations(data.get("human_annotations"))
    ratings = check.ratings(data.get("human_annotations"))
    chosen = check.chosen(data.get("chosen"))
    if check.issues:
        return None, check.issues
    return (
        PairSpec(
            line=record.line,
            external_id=external_id,
            task=task,
            prompt_parts=prompt_parts,
            prompt_field=prompt_field,
            response_a=response_a,
            response_b=response_b,
            criterion=criterion,
            prompt_source=prompt_source,
            prompt_metadata=prompt_metadata,
            extra=extra,
            annotations=annotations,
            chosen=chosen,
            ratings=ratings,
        ),
        [],
    )


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects in ``value`` nest more than ``limit`` levels (no recursion)."""
    if not value or not isinstance(value, dict | list):
        return False
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _shown(value: Any) -> str:
    """A value for a message: a scalar as it is (cut short), a list or an object by its type."""
    if isinstance(value, dict | list):
        return _json_type(value)
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
