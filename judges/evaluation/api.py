"""Judge evaluations and imported judgements over the REST API (docs/api.md, "Judge
evaluations"): curators and researchers of the project start, import and read them;
annotators get 403, outsiders 404, through the same access helpers as every endpoint."""

from __future__ import annotations

import io

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.middleware import allows_large_upload
from judges.core.access import get_evaluation_for_user
from judges.core.api import BROKER_DOWN_RESPONSE
from judges.evaluation.judgement_import import judgements_import_text
from judges.evaluation.scoring import DEFAULT_SEED, MAX_SEED
from judges.evaluation.selectors import evaluation_summary, leaderboard
from judges.evaluation.services import judge_evaluation_create, judge_evaluation_resume
from judges.models import Judge
from judges.roster.api import JudgeField


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


RELEASE_PARAMETER = OpenApiParameter(
    "release",
    str,
    description="X.Y.Z: the leaderboard on that release; 'reference': on the imported "
    "reference labels; none: the consensus.",
)


class EvaluationListApi(APIView):
    class InputSerializer(serializers.Serializer):
        judge = JudgeField(slug_field="name")
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
        judge = JudgeField(slug_field="name")
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
