"""Flags over REST (docs/api.md, "Flags"): an annotator reads her own flags and the replies
to them; the project's curators list flags, reply and resolve (researchers may list). An
annotator raises a flag on her assignment: ``annotation.queue.api.FlagApi``."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.errors import InvalidInput
from annotation.core.limits import MAX_FLAG_REPLY_CHARS
from annotation.core.strict import StrictInputSerializer
from annotation.flags.selectors import (
    FLAG_STATES,
    annotator_flags,
    get_flag_for_user,
    project_flags,
    prompt_excerpt,
)
from annotation.flags.services import flag_reply, flag_resolve
from annotation.models import Flag, Role

_ERROR = inline_serializer("FlagError", fields={"detail": serializers.CharField()})


class MyReplySerializer(serializers.Serializer):
    text = serializers.CharField()
    created_at = serializers.DateTimeField()


class MyFlagSerializer(serializers.Serializer):
    """An annotator's own flag: no pair id, model or vote, only the start of its prompt."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Flag.Kind.choices)
    note = serializers.CharField(allow_blank=True)
    prompt = serializers.CharField(help_text="The start of the pair's prompt text.")
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    replies = MyReplySerializer(many=True)


class ReplySerializer(MyReplySerializer):
    author = serializers.CharField(allow_null=True, help_text="The curator's username.")


class FlagSerializer(serializers.Serializer):
    """A flag as the curators see it."""

    id = serializers.IntegerField()
    pair = serializers.CharField(help_text="The pair's import id.")
    pair_id = serializers.IntegerField()
    annotator = serializers.CharField()
    kind = serializers.ChoiceField(choices=Flag.Kind.choices)
    note = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolved_by = serializers.CharField(allow_null=True)
    replies = ReplySerializer(many=True)


def _replies(flag: Flag, *, authors: bool) -> list[dict]:
    """The replies to ``flag``; with ``authors``, each curator's username (the staff's view)."""
    rows = []
    for reply in flag.comments.all():
        row = {"text": reply.text, "created_at": reply.created_at}
        if authors:
            row["author"] = reply.author.get_username() if reply.author else None
        rows.append(row)
    return rows


def flag_body(flag: Flag) -> dict:
    """``FlagSerializer``'s fields of ``flag`` (its pair, annotator, resolver and replies
    loaded)."""
    return FlagSerializer(
        {
            "id": flag.pk,
            "pair": flag.pair.external_id,
            "pair_id": flag.pair_id,
            "annotator": flag.annotator.get_username(),
            "kind": flag.kind,
            "note": flag.note,
            "created_at": flag.created_at,
            "resolved_at": flag.resolved_at,
            "resolved_by": flag.resolved_by.get_username() if flag.resolved_by else None,
            "replies": _replies(flag, authors=True),
        }
    ).data


class MyFlagsApi(APIView):
    @extend_schema(
        responses=MyFlagSerializer(many=True),
        summary="My flags in a project, with the curators' replies",
    )
    def get(self, request, slug: str):
        project, role = get_project_for_user(request.user, slug, roles=(Role.ANNOTATOR,))
        if role != Role.ANNOTATOR:
            raise PermissionDenied("Only annotators of this project can do this")
        rows = [
            {
                "id": flag.pk,
                "kind": flag.kind,
                "note": flag.note,
                "prompt": prompt_excerpt(flag),
                "created_at": flag.created_at,
                "resolved_at": flag.resolved_at,
                "replies": _replies(flag, authors=False),
            }
            for flag in annotator_flags(project=project, annotator=request.user)
        ]
        return ApiResponse(MyFlagSerializer(rows, many=True).data)


class FlagListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "state", enum=list(FLAG_STATES), default="open", description="Which flags."
            )
        ],
        responses={200: FlagSerializer(many=True), 400: _ERROR},
        summary="A project's flags (curators and researchers)",
    )
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        state = request.query_params.get("state", "open")
        if state not in FLAG_STATES:
            raise InvalidInput(f"state: must be one of {', '.join(FLAG_STATES)}.")
        return ApiResponse(
            [flag_body(flag) for flag in project_flags(project=project, state=state)]
        )


class FlagReplyApi(APIView):
    class InputSerializer(StrictInputSerializer):
        text = serializers.CharField(max_length=MAX_FLAG_REPLY_CHARS)
        resolve = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        request=InputSerializer,
        responses={201: FlagSerializer, 400: _ERROR},
        summary="Reply to a flag (its author reads it); resolve it too with resolve: true",
    )
    def post(self, request, slug: str, pk: int):
        flag, _ = get_flag_for_user(request.user, slug, pk)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        flag_reply(flag=flag, author=request.user, **serializer.validated_data)
        flag, _ = get_flag_for_user(request.user, slug, pk)
        return ApiResponse(flag_body(flag), status=status.HTTP_201_CREATED)


class FlagResolveApi(APIView):
    @extend_schema(
        request=None,
        responses={200: FlagSerializer},
        summary="Resolve a flag (resolving it again changes nothing)",
    )
    def post(self, request, slug: str, pk: int):
        flag, _ = get_flag_for_user(request.user, slug, pk)
        flag_resolve(flag=flag, by=request.user)
        flag, _ = get_flag_for_user(request.user, slug, pk)
        return ApiResponse(flag_body(flag))
