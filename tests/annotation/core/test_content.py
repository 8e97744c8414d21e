"""Content ids are stored in every database that imported pairs: they must never change,
or a re-import would no longer find what it wrote before."""

import uuid

from annotation.core.content import (
    canonical_json,
    parts_json,
    prompt_id,
    prompt_key,
    response_id,
    response_key,
)

CONTENT = [
    {"type": "text", "text": 'Draw a café at night — «ünïcode» "quoted"\n'},
    {"type": "image", "media": "ab" * 32},
]


def test_ids_are_the_pinned_values():
    assert prompt_id(7, CONTENT) == uuid.UUID("f81f5e3e-7598-d41b-e4f9-8243f2e42028")
    assert response_id(7, "Qwen3-VL «x»", CONTENT) == uuid.UUID(
        "fcf33ed7-7954-2696-ae36-04302c04c1db"
    )


def test_pre_encoded_content_gives_the_same_ids():
    encoded = canonical_json(CONTENT)
    assert prompt_id(7, CONTENT, encoded=encoded) == prompt_id(7, CONTENT)
    assert response_id(7, "m", CONTENT, encoded=encoded) == response_id(7, "m", CONTENT)


def test_ids_differ_by_project_model_and_content():
    assert prompt_id(7, CONTENT) != prompt_id(8, CONTENT)
    assert response_id(7, "m", CONTENT) != response_id(7, "n", CONTENT)
    assert prompt_id(7, CONTENT) != prompt_id(7, CONTENT[:1])
    assert prompt_id(7, CONTENT) != response_id(7, "", CONTENT)


def test_keys_are_the_ids_in_hex():
    encoded = canonical_json(CONTENT)
    assert prompt_key(7, encoded) == prompt_id(7, CONTENT).hex
    assert response_key(7, "Qwen3-VL «x»", encoded) == response_id(7, "Qwen3-VL «x»", CONTENT).hex
    assert uuid.UUID(prompt_key(7, encoded)) == prompt_id(7, CONTENT)


def test_parts_json_is_canonical_json_for_every_character():
    """The ids are hashed over this text: orjson must write every character as json does."""
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    for start in range(0, len(everything), 1 << 16):
        parts = [{"type": "text", "text": everything[start : start + (1 << 16)]}, *CONTENT]
        assert parts_json(parts) == canonical_json(parts)
    assert parts_json(CONTENT) == canonical_json(CONTENT)


def test_a_lone_surrogate_is_written_as_json_writes_it():
    parts = [{"type": "text", "text": "broken \ud800 text"}]
    assert parts_json(parts) == canonical_json(parts)
