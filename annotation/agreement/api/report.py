"""The agreement report over REST (docs/api.md, "Agreement"): the cached report, for curators
and researchers; annotators never see agreement."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.agreement.selectors import agreement_report_cached
from annotation.agreement.services import (
    agreement_report_queue_refresh,
    agreement_report_recompute,
)
from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.models import ReportSource

_SOURCE = OpenApiParameter(
    "source", enum=ReportSource.values, default=ReportSource.ALL, description="Which votes count."
)


class AgreementApi(APIView):
    class InputSerializer(serializers.Serializer):
        # The query parameter's name. DRF's metaclass takes declared fields off the class, so
        # this does not replace ``Field.source`` at run time; the stubs only see the attribute.
        source = serializers.ChoiceField(  # type: ignore[assignment]
            choices=ReportSource.values, default=ReportSource.ALL
        )

    def _source(self, data) -> str:
        serializer = self.InputSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data["source"]

    @extend_schema(
        parameters=[_SOURCE],
        responses={200: OpenApiResponse(description="The report (docs/agreement.md).")},
        summary="The agreement report",
        description="The cached report, with its computed_at; computed first when there is "
        "none yet. Votes refresh it after ARBITER_AGREEMENT_DEBOUNCE_S.",
    )
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        source = self._source(request.query_params)
        report = agreement_report_cached(
            project=project, source=source
        ) or agreement_report_recompute(project=project, source=source)
        return ApiResponse(report.data)

    @extend_schema(
        parameters=[_SOURCE],
        request=None,
        responses={
            202: OpenApiResponse(description="A recompute is queued."),
            409: OpenApiResponse(description="One is queued already and has not run yet."),
            503: OpenApiResponse(description="The task broker is down; nothing was queued."),
        },
        summary="Recompute the agreement report",
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        source = self._source(request.query_params)
        agreement_report_queue_refresh(project=project, source=source)
        return ApiResponse(
            {"detail": f"The {source} report is being recomputed."}, status=status.HTTP_202_ACCEPTED
        )
