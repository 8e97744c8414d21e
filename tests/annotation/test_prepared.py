"""Named parameters in the hot path's prepared statements (annotation/core/prepared.py)."""

from __future__ import annotations

import pytest

from annotation.core.prepared import named_dollar_placeholders, positional

SQL = "SELECT %(a)s + %(b)s, %(a)s %% 7, '%%' || %(c)s, %(b)s"


def test_each_name_is_one_number_in_order_of_first_use():
    text, names = named_dollar_placeholders(SQL)
    assert text == "SELECT $1 + $2, $1 % 7, '%' || $3, $2"
    assert names == ("a", "b", "c")


def test_a_positional_parameter_beside_named_ones_is_refused():
    with pytest.raises(ValueError, match="positional"):
        named_dollar_placeholders("SELECT %(a)s, %s")
    # "%%s" is a literal "%" then "s", not a parameter.
    assert named_dollar_placeholders("SELECT '%%s', %(a)s") == ("SELECT '%s', $1", ("a",))


def test_positional_gives_a_value_per_mention_for_the_orm():
    text, values = positional(SQL, {"a": 1, "b": 2, "c": "x"})
    assert text == "SELECT %s + %s, %s %% 7, '%%' || %s, %s"
    assert values == [1, 2, 1, "x", 2]
