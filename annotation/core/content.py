"""Content parts and the ids derived from them.

A prompt's or response's id is a hash of what it is, so identical content is stored once
and an import knows every foreign key before it writes anything. The hash is taken over
canonical JSON (sorted keys, no spaces, text as it is); an import that has encoded the content
once for storing passes that text in instead of encoding it again.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

_canonical = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: the text the content ids are hashed over."""
    return _canonical(value)


def _digest_id(payload: str) -> uuid.UUID:
    return uuid.UUID(bytes=hashlib.sha256(payload.encode("utf-8")).digest()[:16])


def prompt_id(project_id: int, content: list[dict], *, encoded: str | None = None) -> uuid.UUID:
    """``encoded``: ``canonical_json(content)``, when the caller has it already."""
    body = canonical_json(content) if encoded is None else encoded
    return _digest_id(f'["prompt",{int(project_id)},{body}]')


def response_id(
    project_id: int, model_name: str, content: list[dict], *, encoded: str | None = None
) -> uuid.UUID:
    """``encoded``: ``canonical_json(content)``, when the caller has it already."""
    body = canonical_json(content) if encoded is None else encoded
    return _digest_id(f'["response",{int(project_id)},{canonical_json(model_name)},{body}]')


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
