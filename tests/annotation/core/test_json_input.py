"""The one reading of clients' JSON (annotation/core/json_input.py): what Python's ``json`` took
and a later step turned into a 500 is refused with a message saying why."""

from __future__ import annotations

import pytest

from annotation.core.json_input import MAX_JSON_DEPTH, JsonRefused, json_loads, text_refusal


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 1100 + "]" * 1100, f"nested deeper than {MAX_JSON_DEPTH}"),
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested deeper"),
        ('{"a": ' + "[" * 70 + "]" * 70 + "}", "nested deeper"),
        ('{"pair": "a\\u0000b"}', "NUL"),
        ('{"a\\u0000": 1}', "NUL"),
        ('"\\u0000"', "NUL"),
        ('["\\ud800"]', "surrogate"),
        ("9" * 5000, "infinity"),
        ("1e400", "infinity"),
        ("NaN", "not valid JSON"),
        ("{pair: 1}", "not valid JSON"),
    ],
)
def test_refused_with_the_reason(text, words):
    with pytest.raises(JsonRefused, match=words):
        json_loads(text)


def test_what_is_taken_is_json_as_usual():
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_loads(nested) is not None
    assert json_loads(b'{"text": "\\\\u0000 is how JSON writes NUL", "n": 1e300}') == {
        "text": "\\u0000 is how JSON writes NUL",
        "n": 1e300,
    }
    assert json_loads('["\\ud83d\\ude00", "[[[[", 12345678901234567890]') == [
        "\U0001f600",
        "[[[[",
        12345678901234567890,  # an unsigned 64-bit int, exact
    ]


def test_text_refusal_names_nul_and_lone_surrogates():
    assert text_refusal("fine") is None
    assert "NUL" in text_refusal("a\x00b")
    assert "surrogate" in text_refusal("\ud800")
