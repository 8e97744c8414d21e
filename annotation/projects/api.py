"""Projects and pairs. Pairs (with model names and judge outcomes) are for curators and
researchers only; annotators reach pairs through the blinded queue endpoints. Curators
exclude pairs and include them again (docs/api.md, "Excluding pairs")."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, STAFF_ROLES, get_project_for_user
from annotation.core.limits import MAX_EXCLUSION_REASON_CHARS
from annotation.core.media_keys import media_path
from annotation.models import Membership, Pair, PairStatus, Project
from annotation.pairs.services import pairs_exclude, pairs_include

_ERROR = inline_serializer("PairActionError", fields={"detail": serializers.CharField()})


class ProjectSerializer(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields: tuple[str, ...] = (
            "slug",
            "name",
            "guidelines",
            "scale",
            "overlap",
            "consensus_rule",
            "min_agree",
            "allow_media_urls",
            "media_serve_source",
            "history_shows_consensus",
            "lease_minutes",
            "require_rationale",
            "paused",
            "created_at",
        )


class ProjectListApi(APIView):
    class OutputSerializer(ProjectSerializer):
        # The requesting user's role, from the ``roles`` context (project pk to role).
        role = serializers.SerializerMethodField()

        class Meta(ProjectSerializer.Meta):
            fields = (*ProjectSerializer.Meta.fields, "role")

        def get_role(self, project: Project) -> str:
            return self.context["roles"][project.pk]

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request):
        memberships = list(
            Membership.objects.filter(user=request.user)
            .select_related("project")
            .order_by("project__name")
        )
        projects = [membership.project for membership in memberships]
        roles = {membership.project_id: membership.role for membership in memberships}
        return ApiResponse(
            self.OutputSerializer(projects, many=True, context={"roles": roles}).data
        )


class ProjectDetailApi(APIView):
    @extend_schema(responses=ProjectListApi.OutputSerializer)
    def get(self, request, slug: str):
        project, role = get_project_for_user(request.user, slug)
        serializer = ProjectListApi.OutputSerializer(project, context={"roles": {project.pk: role}})
        return ApiResponse(serializer.data)


class PairSerializer(serializers.ModelSerializer):
    """A pair as staff see it: model names, and media parts with their sha256 and the URL of
    their bytes (which names an opaque id, as the annotators' do)."""

    id = serializers.CharField(source="external_id")
    prompt = serializers.SerializerMethodField()
    response_a = serializers.SerializerMethodField()
    response_b = serializers.SerializerMethodField()

    class Meta:
        model = Pair
        fields = (
            "id",
            "task",
            "status",
            "prompt",
            "response_a",
            "response_b",
            "criterion",
            "metadata",
            "priority",
            "target_votes",
            "vote_count",
            "is_gold",
            "prior_label",
            "ensemble_label",
            "ensemble_agreement",
            "consensus_label",
            "excluded_from",
            "exclusion_reason",
            "excluded_at",
            "created_at",
        )

    def _content(self, pair, content: list[dict]) -> list[dict]:
        request = self.context.get("request")

        def url(sha256: str) -> str:
            path = media_path(slug=pair.project.slug, sha256=sha256)
            return request.build_absolute_uri(path) if request else path

        return [
            {**part, "url": url(part["media"])} if "media" in part else part for part in content
        ]

    def _response(self, pair, response) -> dict:
        return {"model_name": response.model_name, "content": self._content(pair, response.content)}

    def get_prompt(self, pair) -> list[dict]:
        return self._content(pair, pair.prompt.content)

    def get_response_a(self, pair) -> dict:
        return self._response(pair, pair.response_a)

    def get_response_b(self, pair) -> dict:
        return self._response(pair, pair.response_b)


def _pairs_for(request, slug: str):
    project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    return Pair.objects.filter(project=project).select_related(
        "project", "prompt", "response_a", "response_b"
    )


@extend_schema(
    parameters=[
        OpenApiParameter("status", enum=PairStatus.values),
        OpenApiParameter("task", str),
    ]
)
class PairListApi(generics.ListAPIView):
    serializer_class = PairSerializer

    def get_queryset(self):
        pairs = _pairs_for(self.request, self.kwargs["slug"]).order_by("id")
        status = self.request.query_params.get("status")
        if status:
            if status not in PairStatus.values:
                raise serializers.ValidationError(
                    {"status": f"Unknown status {status!r}; use one of {PairStatus.values}"}
                )
            pairs = pairs.filter(status=status)
        task = self.request.query_params.get("task")
        if task:
            pairs = pairs.filter(task=task)
        return pairs


class PairDetailApi(APIView):
    @extend_schema(responses=PairSerializer)
    def get(self, request, slug: str, external_id: str):
        pair = get_object_or_404(_pairs_for(request, slug), external_id=external_id)
        return ApiResponse(PairSerializer(pair, context={"request": request}).data)


class PairExcludeApi(APIView):
    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=MAX_EXCLUSION_REASON_CHARS)

    @extend_schema(
        request=InputSerializer,
        responses={200: PairSerializer, 400: _ERROR, 403: _ERROR, 404: _ERROR},
        summary="Exclude a pair (curators)",
        description="Never served again; left out of consensus, releases, agreement, "
        "leaderboards and judge scores; live leases released; votes kept. The reason is "
        "recorded in the audit log. A pair excluded already is left as it is (200); a pair "
        "a filter run is judging answers 400.",
    )
    def post(self, request, slug: str, external_id: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        pair = get_object_or_404(Pair, project=project, external_id=external_id)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        pairs_exclude(
            project=project,
            pair_ids=[pair.pk],
            reason=serializer.validated_data["reason"],
            actor=request.user,
        )
        return _pair_answer(request, pair.pk)


class PairIncludeApi(APIView):
    @extend_schema(
        request=None,
        responses={200: PairSerializer, 403: _ERROR, 404: _ERROR},
        summary="Include an excluded pair again (curators)",
        description="The pair gets back the status it had when it was excluded; a pair not "
        "excluded is left as it is.",
    )
    def post(self, request, slug: str, external_id: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        pair = get_object_or_404(Pair, project=project, external_id=external_id)
        pairs_include(project=project, pair_ids=[pair.pk], actor=request.user)
        return _pair_answer(request, pair.pk)


def _pair_answer(request, pair_id: int) -> ApiResponse:
    pair = Pair.objects.select_related("project", "prompt", "response_a", "response_b").get(
        pk=pair_id
    )
    return ApiResponse(PairSerializer(pair, context={"request": request}).data)
