"""The model leaderboard over REST (docs/leaderboard.md): the response models ranked by
Bradley-Terry strength from the human judgements, as JSON or CSV; curators and researchers
only, since it names models."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.leaderboard.bradley_terry import BOOTSTRAP_ROUNDS, BOOTSTRAP_SEED
from annotation.leaderboard.export import model_leaderboard_csv
from annotation.leaderboard.selectors import (
    MAX_BOOTSTRAP_ROUNDS,
    ModelLeaderboard,
    ModelSource,
    model_leaderboard,
)

_PARAMETERS = [
    OpenApiParameter(
        "source",
        enum=ModelSource.values,
        default=ModelSource.CONSENSUS,
        description="consensus: one comparison per decided pair; votes: every human vote; "
        "reference: the labels that came with the import.",
    ),
    OpenApiParameter("task", str, description="Only this task's pairs."),
    OpenApiParameter("rounds", int, default=BOOTSTRAP_ROUNDS, description="Bootstrap rounds."),
    OpenApiParameter("seed", int, default=BOOTSTRAP_SEED, description="The bootstrap's seed."),
]


class _ModelLeaderboardApi(APIView):
    class InputSerializer(serializers.Serializer):
        # A query parameter's name; DRF takes declared fields off the class, so this does
        # not replace ``Field.source`` at run time (the stubs only see the attribute).
        source = serializers.ChoiceField(  # type: ignore[assignment]
            choices=ModelSource.values, default=ModelSource.CONSENSUS
        )
        task = serializers.SlugField(max_length=64, required=False, default="")
        rounds = serializers.IntegerField(
            min_value=0, max_value=MAX_BOOTSTRAP_ROUNDS, default=BOOTSTRAP_ROUNDS
        )
        seed = serializers.IntegerField(min_value=0, max_value=2**32 - 1, default=BOOTSTRAP_SEED)

    def _board(self, request, slug: str) -> ModelLeaderboard:
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        serializer = self.InputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        return model_leaderboard(project=project, **serializer.validated_data)


class ModelLeaderboardApi(_ModelLeaderboardApi):
    @extend_schema(
        parameters=_PARAMETERS,
        responses={
            200: OpenApiResponse(
                description='{"source", "pairs", "models": [{"model", "score", "low", '
                '"high", "wins", "losses", "ties", "pairs"}]}, best first.'
            )
        },
        summary="The model leaderboard",
    )
    def get(self, request, slug: str):
        return ApiResponse(self._board(request, slug).as_json())


class ModelLeaderboardCsvApi(_ModelLeaderboardApi):
    @extend_schema(
        parameters=_PARAMETERS,
        responses={
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="A row per model, best first."
            )
        },
        summary="The model leaderboard as CSV",
    )
    def get(self, request, slug: str):
        return model_leaderboard_csv(self._board(request, slug), slug=slug)
