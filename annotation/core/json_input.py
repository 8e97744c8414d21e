"""JSON from clients, parsed once and the same way everywhere (docs/api.md, "Errors"): request
bodies of the REST API, judgement-import and best-of-N lines, page cursors.

orjson refuses what Python's ``json`` lets through to a 500 further on: lone surrogates
(which PostgreSQL cannot store), numbers that overflow a double (``1e400``, 5,000 digits), NaN,
and nesting past 1,024 levels (where ``json`` raises RecursionError). Here we also refuse NUL
in any string or key (PostgreSQL text cannot hold one) and nesting deeper than
``MAX_JSON_DEPTH``, which no Arbiter input comes near, so no later step recurses that deep.
Every refusal is a ``ValueError`` whose message says what is wrong.
"""

from __future__ import annotations

from typing import Any

import orjson

# The deepest nesting of arrays and objects accepted; Arbiter's deepest input (a best-of-N
# item: items, item, candidates, candidate, content, part) is six levels.
MAX_JSON_DEPTH = 64
NUL = "\x00"
_ORJSON_TOO_DEEP = "depth limit exceeded"  # orjson's message past its own 1,024 levels


class JsonRefused(ValueError):
    """The text is not JSON Arbiter takes; the message says why, for the client."""


def text_refusal(value: str) -> str | None:
    """Why a client's text cannot be stored (a NUL, a lone surrogate), or None when it can.
    The one check for text that did not come through ``json_loads`` (addresses, query
    strings); names what is wrong, never echoes the text."""
    if NUL in value:
        return "text may not contain NUL (\\u0000) characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "text may not contain lone surrogates (\\ud800 to \\udfff)"
    return None


def _check_tree(value: Any, *, max_depth: int, walk_strings: bool, walk_depth: bool) -> None:
    """Walks the parsed value once, without recursion, for nesting and NUL."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
            if walk_strings and any(NUL in key for key in node):
                raise JsonRefused("JSON keys may not contain NUL (\\u0000) characters")
        elif isinstance(node, list):
            children = node
        else:
            continue
        if walk_depth and depth >= max_depth:
            raise JsonRefused(f"JSON nested deeper than {max_depth} levels")
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif walk_strings and isinstance(child, str) and NUL in child:
                raise JsonRefused("JSON strings may not contain NUL (\\u0000) characters")


def json_loads(data: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The value of ``data``; ``JsonRefused`` saying why when it is not JSON Arbiter takes."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if exc.msg == _ORJSON_TOO_DEEP:
            raise JsonRefused(f"JSON nested deeper than {max_depth} levels") from None
        raise JsonRefused(f"not valid JSON ({exc.msg})") from None
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # Cheap scans of the text decide whether the walk is needed at all: NUL can only be in a
    # string as the escape \u0000, and nesting needs that many brackets.
    walk_strings = b"\\u0000" in raw
    walk_depth = raw.count(b"[") + raw.count(b"{") > max_depth
    if isinstance(value, str):
        if walk_strings and NUL in value:
            raise JsonRefused("JSON strings may not contain NUL (\\u0000) characters")
    elif walk_strings or walk_depth:
        _check_tree(value, max_depth=max_depth, walk_strings=walk_strings, walk_depth=walk_depth)
    return value
