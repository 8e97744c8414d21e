"""Judge evaluations and best-of-N over the REST API (docs/api.md, "Judge evaluations"):
curators and researchers of the project start, import and read them; annotators get 403,
outsiders 404, through the same access helpers as every endpoint."""

from __future__ import annotations

import io

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.access import STAFF_ROLES, get_project_for_user
from annotation.middleware import allows_large_upload
from judges.access import get_evaluation_for_user
from judges.api import BROKER_DOWN_RESPONSE
from judges.evaluation import DEFAULT_SEED, MAX_SEED
from judges.models import Judge
from judges.selectors import evaluation_summary, judges_for_project, leaderboard
from judges.services.best_of_n import (
    MAX_API_CALLS,
    METHODS,
    best_of_n,
    calls_needed,
    parse_items,
)
from judges.services.evaluations import judge_evaluation_create, judge_evaluation_resume
from judges.services.judgement_import import judgements_import_text


class EvaluationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    judge = serializers.CharField()
    kind = serializers.CharField()
    target = serializers.CharField(
        help_text="SLUG@X.Y.Z for a release, SLUG:reference for the reference labels, SLUG for "
        "the consensus."
    )
    project = serializers.CharField()
    release = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["pending", "running", "succeeded", "failed"])
    calls = serializers.IntegerField(help_text="Judge calls this evaluation made.")
    seed = serializers.IntegerField()
    error = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    pairs = serializers.IntegerField()
    results = serializers.JSONField(
        allow_null=True, help_text="docs/judges-evaluation.md, 'The results'; null until done."
    )


@extend_schema_field(OpenApiTypes.STR)
class _JudgeField(serializers.SlugRelatedField):
    """A judge the project may use, by name; any other name is unknown, as in filter runs."""

    def get_queryset(self):
        return judges_for_project(self.context["project"])


RELEASE_PARAMETER = OpenApiParameter(
    "release",
    str,
    description="X.Y.Z: the leaderboard on that release; 'reference': on the imported "
    "reference labels; none: the consensus.",
)


class EvaluationListApi(APIView):
    class InputSerializer(serializers.Serializer):
        judge = _JudgeField(slug_field="name")
        release = serializers.CharField(
            required=False,
            default="",
            allow_blank=True,
            help_text="X.Y.Z; 'reference': the imported reference labels; blank: consensus.",
        )
        seed = serializers.IntegerField(default=DEFAULT_SEED, min_value=0, max_value=MAX_SEED)
        call = serializers.BooleanField(
            default=True, help_text="Ask the judge for missing answers; false: score what is there."
        )

    @extend_schema(parameters=[RELEASE_PARAMETER], responses=EvaluationSerializer(many=True))
    def get(self, request, slug: str):
        """The leaderboard: finished evaluations on one target, best dual accuracy first."""
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        rows = leaderboard(project, release=request.query_params.get("release", ""))
        return ApiResponse([evaluation_summary(evaluation) for evaluation in rows])

    @extend_schema(
        request=InputSerializer, responses={202: EvaluationSerializer, 503: BROKER_DOWN_RESPONSE}
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        data = self.InputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        evaluation = judge_evaluation_create(
            project=project, created_by=request.user, **data.validated_data
        )
        return ApiResponse(evaluation_summary(evaluation), status=status.HTTP_202_ACCEPTED)


class EvaluationDetailApi(APIView):
    @extend_schema(responses=EvaluationSerializer)
    def get(self, request, slug: str, evaluation_id: int):
        evaluation, _ = get_evaluation_for_user(request.user, slug, evaluation_id)
        return ApiResponse(evaluation_summary(evaluation))


class EvaluationResumeApi(APIView):
    @extend_schema(request=None, responses={200: EvaluationSerializer, 503: BROKER_DOWN_RESPONSE})
    def post(self, request, slug: str, evaluation_id: int):
        evaluation, _ = get_evaluation_for_user(request.user, slug, evaluation_id)
        judge_evaluation_resume(evaluation=evaluation)
        return ApiResponse(evaluation_summary(evaluation))


@allows_large_upload  # curators may send large files, as to the pair import
class JudgementImportApi(APIView):
    parser_classes = (MultiPartParser,)

    class InputSerializer(serializers.Serializer):
        judge = _JudgeField(slug_field="name")
        file = serializers.FileField(
            help_text="JSONL (pair, order, verdict or score per line) or MMRB2's prediction "
            "JSON ({pair id: {forward: [{judgement}], reverse: [...]}})."
        )

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={
            201: inline_serializer(
                "JudgementImport", fields={"imported": serializers.IntegerField()}
            )
        },
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        data = self.InputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        judge: Judge = data.validated_data["judge"]
        upload = data.validated_data["file"]
        try:
            text = io.TextIOWrapper(upload.file, encoding="utf-8").read()
        except UnicodeDecodeError:
            raise serializers.ValidationError({"file": "The file is not UTF-8 text."}) from None
        count = judgements_import_text(judge=judge, project=project, text=text)
        return ApiResponse({"imported": count}, status=status.HTTP_201_CREATED)


class BestOfNApi(APIView):
    class InputSerializer(serializers.Serializer):
        judge = _JudgeField(slug_field="name")
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
