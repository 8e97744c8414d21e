"""Content parts and the ids derived from them.

A prompt's or response's id is a hash of what it is, so identical content is stored once
and an import knows every foreign key before it writes anything.
"""

from __future__ import annotations

import hashlib
import json
import uuid


def _digest_id(*parts) -> uuid.UUID:
    payload = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return uuid.UUID(bytes=hashlib.sha256(payload.encode("utf-8")).digest()[:16])


def prompt_id(project_id: int, content: list[dict]) -> uuid.UUID:
    return _digest_id("prompt", project_id, content)


def response_id(project_id: int, model_name: str, content: list[dict]) -> uuid.UUID:
    return _digest_id("response", project_id, model_name, content)


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def image_part(sha256: str) -> dict:
    return {"type": "image", "media": sha256}
