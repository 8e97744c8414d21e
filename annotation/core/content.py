"""Content parts and the ids derived from them.

A prompt's or response's id is a hash of what it is, so identical content is stored once
and an import knows every foreign key before it writes anything. The hash is taken over
canonical JSON (sorted keys, no spaces, text as it is); an import that has encoded the content
once for storing passes that text in instead of encoding it again. An import takes the ids as
32 hex digits (``prompt_key``, ``response_key``: the same hash, without building a ``UUID``
per row) and its parts' JSON from orjson (``parts_json``: the same text, 15 times faster).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import orjson

_canonical = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: the text the content ids are hashed over."""
    return _canonical(value)


def parts_json(parts: list[dict[str, str]]) -> str:
    """``canonical_json(parts)`` for content parts, whose keys and values are all strings:
    orjson writes strings exactly as ``json`` does without ``ensure_ascii`` (the same escapes,
    every other character as it is; tests/annotation/core/test_content.py checks each code point).
    A lone surrogate, which orjson refuses, goes through ``json`` as before."""
    try:
        return orjson.dumps(parts, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return canonical_json(parts)


def _digest_hex(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def prompt_key(project_id: int, encoded: str) -> str:
    """``prompt_id`` as 32 hex digits (a ``uuid`` column's input), from the content's
    ``canonical_json``."""
    return _digest_hex(f'["prompt",{int(project_id)},{encoded}]')


def response_key(project_id: int, model_name: str, encoded: str) -> str:
    """``response_id`` as 32 hex digits, from the content's ``canonical_json``."""
    return _digest_hex(f'["response",{int(project_id)},{_string_json(model_name)},{encoded}]')


def _string_json(text: str) -> str:
    """``canonical_json`` of a string (see ``parts_json``)."""
    try:
        return orjson.dumps(text).decode()
    except TypeError:
        return canonical_json(text)


def prompt_id(project_id: int, content: list[dict], *, encoded: str | None = None) -> uuid.UUID:
    """``encoded``: ``canonical_json(content)``, when the caller has it already."""
    body = canonical_json(content) if encoded is None else encoded
    return uuid.UUID(hex=prompt_key(project_id, body))


def response_id(
    project_id: int, model_name: str, content: list[dict], *, encoded: str | None = None
) -> uuid.UUID:
    """``encoded``: ``canonical_json(content)``, when the caller has it already."""
    body = canonical_json(content) if encoded is None else encoded
    return uuid.UUID(hex=response_key(project_id, model_name, body))


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def image_part(sha256: str) -> dict:
    return {"type": "image", "media": sha256}


# Content part types that reference a ``Media`` row by hash (``{"type": ..., "media": sha256}``).
IMAGE, VIDEO, AUDIO, MODEL3D = "image", "video", "audio", "model3d"
MEDIA_PART_TYPES = (IMAGE, VIDEO, AUDIO, MODEL3D)
# Parts that are one time-based or 3D file each, beside images.
AV_PART_TYPES = (VIDEO, AUDIO, MODEL3D)


def media_part(kind: str, sha256: str) -> dict:
    """A part referencing stored media of ``kind`` (one of MEDIA_PART_TYPES)."""
    return {"type": kind, "media": sha256}
