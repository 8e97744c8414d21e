"""One feature's routes in a URL conf: a table of (route, view, name) under the feature's
prefix, so that a conf lists what each page is rather than repeating ``path(...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path


def routes(prefix: str, *table: tuple[str, Callable[..., Any], str]) -> list[URLPattern]:
    """``path(prefix + route, view, name=name)`` for each row, in the table's order (the
    order Django tries them in)."""
    return [path(prefix + route, view, name=name) for route, view, name in table]
