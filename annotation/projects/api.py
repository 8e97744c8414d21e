"""Projects and pairs. Pairs (with model names and judge outcomes) are for curators and
researchers only; annotators reach pairs through the blinded queue endpoints."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.media_keys import media_path
from annotation.models import Membership, Pair, PairStatus, Project


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
