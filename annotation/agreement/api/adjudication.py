"""A curator's decision on a disputed pair over REST (docs/api.md, "Adjudication"): the same
service as the adjudication page, ``annotation.decisions.services.pair_adjudicate``."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.limits import MAX_ADJUDICATION_NOTE_CHARS
from annotation.decisions.services import pair_adjudicate
from annotation.models import Pair, Side

_ERROR = inline_serializer("AdjudicationError", fields={"detail": serializers.CharField()})


class AdjudicateApi(APIView):
    # ``label`` is the field's name in the API. DRF's metaclass takes declared fields off the
    # class, so it does not replace ``Field.label`` at run time; the stubs only see the class
    # attribute.
    class InputSerializer(serializers.Serializer):
        label = serializers.ChoiceField(choices=Side.values)  # type: ignore[assignment]
        note = serializers.CharField(max_length=MAX_ADJUDICATION_NOTE_CHARS)

    class OutputSerializer(serializers.Serializer):
        pair = serializers.CharField(help_text="The pair's id in the import.")
        label = serializers.ChoiceField(choices=Side.values)  # type: ignore[assignment]
        note = serializers.CharField()
        curator = serializers.CharField()
        created_at = serializers.DateTimeField()
        supersedes = serializers.IntegerField(
            allow_null=True, help_text="How many earlier decisions this one replaces."
        )

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 400: _ERROR, 403: _ERROR, 404: _ERROR, 409: _ERROR},
        summary="Decide a disputed pair (curators)",
        description="The decision becomes the pair's consensus label and is recorded as an "
        "adjudication, never as a vote. A pair already adjudicated may be decided again; "
        "any other pair that is not disputed answers 409.",
    )
    def post(self, request, slug: str, external_id: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        pair = get_object_or_404(
            Pair.objects.select_related("project"), project=project, external_id=external_id
        )
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        adjudication = pair_adjudicate(pair=pair, curator=request.user, **serializer.validated_data)
        body = {
            "pair": pair.external_id,
            "label": adjudication.label,
            "note": adjudication.note,
            "curator": request.user.get_username(),
            "created_at": adjudication.created_at,
            "supersedes": pair.adjudications.exclude(pk=adjudication.pk).count(),
        }
        return ApiResponse(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)
