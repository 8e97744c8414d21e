"""The REST API's JSON parser (docs/api.md, "Errors"): Arbiter's one JSON reading for client
input, so a body too deep, with NUL or a lone surrogate in a string, or a number no double
holds is a 400 naming the problem on every endpoint, never a 500 further on."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from annotation.core.json_input import JsonRefused, json_loads


class JsonParser(BaseParser):
    """DRF's ``JSONParser`` with ``annotation.core.json_input.json_loads`` (orjson) instead of
    ``json``: the same media type, the stricter reading."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        data = stream.read() if stream is not None else b""
        try:
            return json_loads(data)
        except JsonRefused as exc:
            raise ParseError(f"JSON parse error: {exc}.") from None
