"""OpenAPI component names for the serializers an API view nests (each API view has its
own small ``InputSerializer`` and ``OutputSerializer``). drf-spectacular would name every one
of them ``Input`` or ``Output``, so two views' components would collide; here a nested
serializer is named after its view: ``VoteApi.InputSerializer`` becomes ``VoteInput``."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if name.endswith(suffix) and name != suffix else name


class ArbiterAutoSchema(AutoSchema):
    def get_serializer_name(self, serializer, direction):
        qualname = type(serializer).__qualname__
        if "<locals>" in qualname or "." not in qualname:
            return super().get_serializer_name(serializer, direction)
        *outer, inner = qualname.split(".")
        return _strip(outer[-1], "Api") + _strip(inner, "Serializer")
