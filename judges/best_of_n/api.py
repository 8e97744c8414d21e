"""Best-of-N over the REST API (docs/api.md, "Judge evaluations"): curators and researchers
of the project pick the best of N candidates with a judge; annotators get 403, outsiders 404."""

from __future__ import annotations

from drf_spectacular.utils import (
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user
from judges.best_of_n.services import (
    MAX_API_CALLS,
    METHODS,
    best_of_n,
    calls_needed,
    parse_items,
)
from judges.roster.api import JudgeField


class BestOfNApi(APIView):
    class InputSerializer(serializers.Serializer):
        judge = JudgeField(slug_field="name")
        method = serializers.ChoiceField(choices=METHODS, default="knockout")
        items = serializers.ListField(
            child=serializers.JSONField(),
            min_length=1,
            help_text='{"id", "prompt", "task", "criterion", "candidates": [{"id", "content"}]}',
        )

    @extend_schema(
        request=InputSerializer,
        responses=inline_serializer(
            "BestOfN",
            fields={
                "judge": serializers.CharField(),
                "method": serializers.CharField(),
                "calls": serializers.IntegerField(),
                "results": serializers.ListField(child=serializers.JSONField()),
            },
        ),
    )
    def post(self, request, slug: str):
        """The best candidate per prompt; the judge is called synchronously, at most
        MAX_API_CALLS times per request (the command line has no limit)."""
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        data = self.InputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        rows = [(f"items[{i}]", row) for i, row in enumerate(data.validated_data["items"])]
        items = parse_items(rows, project=project)
        method = data.validated_data["method"]
        if (calls := calls_needed(items, method)) > MAX_API_CALLS:
            raise serializers.ValidationError(
                {"items": f"{calls} judge calls by {method}; a request may make {MAX_API_CALLS}."}
            )
        outcome = best_of_n(judge=data.validated_data["judge"], items=items, method=method)
        return ApiResponse(outcome)
