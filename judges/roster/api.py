"""API pieces about judges that other features' endpoints share: a judge named in a request."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    extend_schema_field,
)
from rest_framework import serializers

from judges.roster.selectors import judges_for_project


@extend_schema_field(OpenApiTypes.STR)
class JudgeField(serializers.SlugRelatedField):
    """A judge the project may use, by name; any other name is unknown, as in filter runs."""

    def get_queryset(self):
        return judges_for_project(self.context["project"])
