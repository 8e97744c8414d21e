"""Content ids are stored in every database that imported pairs: they must never change,
or a re-import would no longer find what it wrote before."""

import uuid

from annotation.core.content import canonical_json, prompt_id, response_id

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
