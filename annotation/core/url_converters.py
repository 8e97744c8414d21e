"""Path converters shared by the pages and the API; importing this module registers them."""

from __future__ import annotations

from django.urls import register_converter

from annotation.models import RELEASE_VERSION_REGEX


class ReleaseVersionConverter:
    """A release version in a path, ``X.Y.Z``: a path that is not one never reaches a view
    (and ``new`` stays a page of its own). The model's own rule, so every stored version has
    a URL (``reverse`` never fails on one)."""

    regex = RELEASE_VERSION_REGEX

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ReleaseVersionConverter, "version")
