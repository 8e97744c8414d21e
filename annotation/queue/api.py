"""The annotator's queue over REST: claim the next pair, vote, skip, flag, undo. Every answer is
the blinded view (``annotation.queue.presentation``): left and right, never A/B or model names."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.accounts.authentication import PreparedTokenAuthentication, is_named_token
from annotation.core.access import get_project_for_user
from annotation.core.content import MEDIA_PART_TYPES
from annotation.core.json_input import text_refusal
from annotation.core.limits import (
    MAX_FLAG_NOTE_CHARS,
    MAX_RATIONALE_CHARS,
    MAX_SKIP_NOTE_CHARS,
    MAX_TIME_ON_TASK_MS,
)
from annotation.core.scales import on_screen_vote
from annotation.core.strict import StrictInputSerializer
from annotation.models import Flag, Project, Role, Skip
from annotation.queue.history import (
    CONSENSUS_WORDS,
    SESSION_GAP_MINUTES,
    SPEED_WINDOW_VOTES,
    HistoryFilter,
    HistoryInputError,
    annotator_speed,
    history_rows,
    own_votes,
)
from annotation.queue.presentation import assignment_payload, undone_answer
from annotation.queue.selectors import assignment_access_checked, assignment_for_annotator
from annotation.queue.services.claim import assignment_claim
from annotation.queue.services.flags import assignment_flag
from annotation.queue.services.skips import assignment_skip
from annotation.queue.services.undo import NOTHING_TO_UNDO, last_action_undo
from annotation.queue.services.votes import vote_submit, vote_submit_and_claim
from annotation.queue.statements import token_with_assignment
from config.throttling import AnnotatorLoopThrottle

_ERROR = inline_serializer("Error", fields={"detail": serializers.CharField()})
_DATETIME = serializers.DateTimeField()


def _annotated_project(request, slug: str) -> Project:
    """The project, for a member who annotates it (superusers included only as members)."""
    project, role = get_project_for_user(request.user, slug, roles=(Role.ANNOTATOR,))
    if role != Role.ANNOTATOR:
        raise PermissionDenied("Only annotators of this project can do this")
    return project


class _PartSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["text", *MEDIA_PART_TYPES])
    text = serializers.CharField(required=False)
    url = serializers.CharField(
        required=False, help_text="Opaque media URL (the served copy, without metadata)."
    )
    width = serializers.IntegerField(required=False, help_text="Images and videos.")
    height = serializers.IntegerField(required=False, help_text="Images and videos.")
    duration_seconds = serializers.FloatField(
        required=False, allow_null=True, help_text="Videos and audio."
    )
    frame_rate = serializers.FloatField(required=False, allow_null=True, help_text="Videos.")
    sample_rate = serializers.IntegerField(required=False, help_text="Videos and audio.")
    channels = serializers.IntegerField(required=False, help_text="Videos and audio.")
    poster_url = serializers.CharField(required=False, help_text="A video's first frame.")
    peaks = serializers.ListField(
        child=serializers.FloatField(),
        required=False,
        help_text="An audio clip's waveform: the loudest |sample| (0 to 1) per slice.",
    )
    loudness_lufs = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="An audio clip's integrated loudness (ITU-R BS.1770, EBU R 128); null for "
        "silence.",
    )


class _OptionSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The number key that picks it on the page.")
    field = serializers.ChoiceField(choices=["choice", "value"], help_text="What to send.")
    value = serializers.JSONField(help_text='"left"/"tie"/"right", or 1..6 on likert6.')
    # The payload's key. DRF's metaclass takes declared fields off the class, so this does not
    # replace ``Field.label`` at run time; the stubs only see the class attribute.
    label = serializers.CharField()  # type: ignore[assignment]
    arrow = serializers.CharField(allow_null=True)
    tone = serializers.CharField()


class AssignmentSerializer(serializers.Serializer):
    """Documents ``assignment_payload``: blinded, in the order this assignment shows."""

    id = serializers.IntegerField()
    expires_at = serializers.DateTimeField()
    prompt = _PartSerializer(many=True)
    left = _PartSerializer(many=True)
    right = _PartSerializer(many=True)
    criterion = serializers.CharField(allow_blank=True)
    options = _OptionSerializer(many=True)


class _UndoneSerializer(serializers.Serializer):
    """Documents ``undone_answer``: the answer an undo withdrew, as it was given."""

    action = serializers.ChoiceField(choices=["vote", "skip"])
    choice = serializers.CharField(
        required=False, allow_null=True, help_text='A vote: "left"/"tie"/"right" (else null).'
    )
    value = serializers.IntegerField(
        required=False, allow_null=True, help_text="A likert6 vote: 1..6 on screen (else null)."
    )
    # The payload's key, as in _OptionSerializer.
    label = serializers.CharField(  # type: ignore[assignment]
        help_text="The option's label, or the skip reason's."
    )
    rationale = serializers.CharField(required=False, allow_blank=True, help_text="A vote's.")
    reason = serializers.ChoiceField(
        choices=Skip.Reason.choices, required=False, help_text="A skip's."
    )
    note = serializers.CharField(required=False, allow_blank=True, help_text="A skip's.")


class UndoSerializer(AssignmentSerializer):
    undone = _UndoneSerializer(help_text="What you had answered, to answer again or change.")


class ClaimApi(APIView):
    throttle_classes = (AnnotatorLoopThrottle,)

    @extend_schema(
        request=None,
        responses={
            200: AssignmentSerializer,
            204: OpenApiResponse(description="Nothing left for you (or the project is paused)."),
        },
        summary="Claim the next pair",
        description="A lease on the next pair for you; asking again while it is live returns "
        "the same assignment.",
    )
    def post(self, request, slug: str):
        project = _annotated_project(request, slug)
        assignment = assignment_claim(project=project, annotator=request.user)
        if assignment is None:
            return ApiResponse(status=status.HTTP_204_NO_CONTENT)
        return ApiResponse(assignment_payload(assignment, request=request))


class VoteTokenAuthentication(PreparedTokenAuthentication):
    """The API token, read with the assignment the vote is for (``token_with_assignment``):
    one statement where the token, the assignment and the expired-leases check were three.
    The same answers as the token authentication; the assignment waits on the request
    (``voted_assignment``) for the view's own access check."""

    def authenticate(self, request):
        self._request = request
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        if is_named_token(key):  # the view then checks the assignment as for a session
            return super().authenticate_credentials(key)
        request = self._request
        found = token_with_assignment(
            key=key, assignment_id=request.parser_context["kwargs"]["pk"], now=timezone.now()
        )
        request.voted_assignment = found
        return found.user, found.token


class VoteApi(APIView):
    authentication_classes = (VoteTokenAuthentication, SessionAuthentication)
    throttle_classes = (AnnotatorLoopThrottle,)

    class InputSerializer(serializers.Serializer):
        choice = serializers.CharField(
            required=False, help_text="binary: left|right; ternary: left|tie|right."
        )
        value = serializers.IntegerField(
            required=False, help_text="likert6: 1 (left much better) .. 6 (right much better)."
        )
        rationale = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_RATIONALE_CHARS, default=""
        )
        time_on_task_ms = serializers.IntegerField(
            required=False, allow_null=True, min_value=0, max_value=MAX_TIME_ON_TASK_MS
        )
        next = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Also claim the next pair: the answer's `next` holds its assignment (as "
            "the claim answers it), or null when nothing is left for you. One round trip a "
            "vote instead of two; the vote and the claim are the same as the two calls.",
        )

        def validate(self, data):
            if "choice" not in data and "value" not in data:
                raise serializers.ValidationError('Send "choice" or, on likert6, "value".')
            return data

    class VoteSerializer(serializers.Serializer):
        """The vote as the answer renders it (``OutputSerializer`` documents the answer)."""

        id = serializers.IntegerField()
        assignment = serializers.IntegerField()
        choice = serializers.CharField(allow_null=True)
        value = serializers.IntegerField(allow_null=True)
        rationale = serializers.CharField(allow_blank=True)
        time_on_task_ms = serializers.IntegerField(allow_null=True)
        created_at = serializers.DateTimeField()

    class OutputSerializer(VoteSerializer):
        """Documents the answer: the vote, and ``next`` when asked for."""

        next = AssignmentSerializer(
            required=False,
            allow_null=True,
            help_text='Only when the vote asked for "next": the next assignment, or null.',
        )

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            200: OpenApiResponse(OutputSerializer, description="The same vote, sent again."),
            400: _ERROR,
            409: OpenApiResponse(_ERROR, description="A different vote, or a skipped pair."),
        },
        summary="Vote on an assignment",
        # The schemes every other endpoint names: VoteTokenAuthentication is the token's.
        # (The hint says names; drf-spectacular takes these as the security requirements.)
        auth=[{"tokenAuth": []}, {"cookieAuth": []}],  # type: ignore[list-item]
    )
    def post(self, request, pk: int):
        found = getattr(request, "voted_assignment", None)
        if found is None:  # a session, not a token
            assignment = assignment_for_annotator(user=request.user, assignment_id=pk)
            expired = None
        else:
            assignment = assignment_access_checked(
                found.assignment, role=found.role, user=request.user
            )
            expired = found.expired
        data = vote_input(request.data)
        if data is None:  # anything but the plain input: the serializer's answer and errors
            data = dict(_valid(self.InputSerializer, request))
        wants_next = data.pop("next")
        upcoming = None
        if wants_next:
            vote, created, upcoming = vote_submit_and_claim(
                assignment=assignment, annotator=request.user, expired=expired, **data
            )
        else:
            vote, created = vote_submit(assignment=assignment, annotator=request.user, **data)
        shown = on_screen_vote(
            scale=assignment.pair.project.scale,
            left_is_a=assignment.left_is_a,
            side=vote.side,
            value=vote.value,
        )
        # As VoteSerializer renders it, built directly: every value is already its JSON type
        # but the time (a test holds the two equal).
        answer = {
            "id": vote.pk,
            "assignment": assignment.pk,
            **shown,
            "rationale": vote.rationale,
            "time_on_task_ms": vote.time_on_task_ms,
            "created_at": _DATETIME.to_representation(vote.created_at),
        }
        if wants_next:
            # The claim endpoint's claim, in the vote's transaction (docs/api.md, "Vote and
            # claim the next pair in one call").
            answer["next"] = (
                None if upcoming is None else assignment_payload(upcoming, request=request)
            )
        return ApiResponse(
            answer, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class SkipApi(APIView):
    throttle_classes = (AnnotatorLoopThrottle,)

    class InputSerializer(serializers.Serializer):
        reason = serializers.ChoiceField(choices=Skip.Reason.choices)
        note = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_SKIP_NOTE_CHARS, default=""
        )

    class OutputSerializer(serializers.Serializer):
        assignment = serializers.IntegerField()
        reason = serializers.CharField()
        note = serializers.CharField(allow_blank=True)
        created_at = serializers.DateTimeField()

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 400: _ERROR, 409: _ERROR},
        summary="Skip a pair (flags it for curators)",
    )
    def post(self, request, pk: int):
        assignment = assignment_for_annotator(user=request.user, assignment_id=pk)
        data = _valid(self.InputSerializer, request)
        skip = assignment_skip(assignment=assignment, annotator=request.user, **data)
        body = {
            "assignment": assignment.pk,
            "reason": skip.reason,
            "note": skip.note,
            "created_at": skip.created_at,
        }
        return ApiResponse(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class FlagApi(APIView):
    throttle_classes = (AnnotatorLoopThrottle,)

    class InputSerializer(StrictInputSerializer):
        kind = serializers.ChoiceField(choices=Flag.Kind.choices)
        note = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=MAX_FLAG_NOTE_CHARS,
            default="",
            help_text='Required with the kind "other".',
        )
        skip = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Also skip the pair (broken_media as broken content, any other kind as "
            "cannot judge). Without it the assignment stays yours to vote on.",
        )

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        assignment = serializers.IntegerField()
        kind = serializers.CharField()
        note = serializers.CharField(allow_blank=True)
        created_at = serializers.DateTimeField()
        skipped = serializers.BooleanField(help_text="Whether this call skipped the pair.")

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            200: OpenApiResponse(OutputSerializer, description="The same flag, sent again."),
            400: _ERROR,
            409: OpenApiResponse(_ERROR, description="Another flag of yours is open on the pair."),
        },
        summary="Flag the pair of an assignment for the curators (before or after voting)",
    )
    def post(self, request, pk: int):
        assignment = assignment_for_annotator(user=request.user, assignment_id=pk)
        data = _valid(self.InputSerializer, request)
        flag, created, skipped = assignment_flag(
            assignment=assignment, annotator=request.user, **data
        )
        body = {
            "id": flag.pk,
            "assignment": assignment.pk,
            "kind": flag.kind,
            "note": flag.note,
            "created_at": flag.created_at,
            "skipped": skipped is not None,
        }
        return ApiResponse(
            self.OutputSerializer(body).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class UndoApi(APIView):
    throttle_classes = (AnnotatorLoopThrottle,)

    @extend_schema(
        request=None,
        responses={
            200: OpenApiResponse(
                UndoSerializer,
                description="The pair again, to vote on or skip again, with the answer undone.",
            ),
            409: OpenApiResponse(_ERROR, description="Nothing to undo."),
        },
        summary="Undo my last vote or skip (within 60 seconds, before consensus)",
    )
    def post(self, request, slug: str):
        project = _annotated_project(request, slug)
        undone = last_action_undo(annotator=request.user, project=project)
        if undone is None:
            return ApiResponse({"detail": NOTHING_TO_UNDO}, status=status.HTTP_409_CONFLICT)
        body = assignment_payload(undone.assignment, request=request)
        body["undone"] = undone_answer(undone, scale=project.scale)
        return ApiResponse(body)


class MyVotesApi(generics.ListAPIView):
    """The caller's own votes in the project, newest first, as they gave them."""

    class FilterSerializer(serializers.Serializer):
        since = serializers.DateField(
            required=False, help_text="Votes from this day on (YYYY-MM-DD, UTC)."
        )
        until = serializers.DateField(
            required=False, help_text="Votes up to this day, included (YYYY-MM-DD, UTC)."
        )

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        prompt = serializers.CharField(
            allow_blank=True, help_text="The prompt's text (its images, video or audio left out)."
        )
        choice = serializers.CharField(
            allow_null=True, help_text='"left"/"tie"/"right" as it was on your screen (else null).'
        )
        value = serializers.IntegerField(
            allow_null=True, help_text="likert6: 1..6 as it was on your screen (else null)."
        )
        # The payload's key, as in _OptionSerializer.
        label = serializers.CharField()  # type: ignore[assignment]
        rationale = serializers.CharField(allow_blank=True)
        consensus = serializers.ChoiceField(
            choices=list(CONSENSUS_WORDS),
            allow_null=True,
            help_text="Only where the project shows it, and only once the pair's decision is "
            "final: whether your vote matched the consensus (tie: the consensus was a tie and "
            "you took a side). Null otherwise.",
        )

    serializer_class = OutputSerializer

    @extend_schema(
        parameters=[FilterSerializer],
        responses={200: OutputSerializer(many=True), 400: _ERROR},
        summary="My votes in a project",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def list(self, request, *args, **kwargs):
        project = _annotated_project(request, self.kwargs["slug"])
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        try:
            votes = own_votes(
                project=project,
                annotator=request.user,
                history=HistoryFilter(**filters.validated_data),
            )
        except HistoryInputError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None
        page = self.paginate_queryset(votes)
        rows = history_rows(page if page is not None else votes, project=project)
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)


class _SessionSerializer(serializers.Serializer):
    started_at = serializers.DateTimeField(
        help_text="When its first pair was served to you (or its first vote)."
    )
    ended_at = serializers.DateTimeField(help_text="Its last vote.")
    votes = serializers.IntegerField()
    votes_per_hour = serializers.FloatField(allow_null=True)


class MySpeedApi(APIView):
    class OutputSerializer(serializers.Serializer):
        votes = serializers.IntegerField(
            help_text=f"The votes these figures read: your latest, {SPEED_WINDOW_VOTES} at most."
        )
        timed_votes = serializers.IntegerField(
            help_text="Of those, the votes timed from the moment the pair was served to you."
        )
        median_seconds_per_vote = serializers.FloatField(allow_null=True)
        votes_per_hour = serializers.FloatField(
            allow_null=True, help_text="Over the sessions listed."
        )
        sessions = _SessionSerializer(
            many=True,
            help_text=f"Your latest sessions (votes under {SESSION_GAP_MINUTES} minutes apart), "
            "newest first.",
        )

    @extend_schema(responses=OutputSerializer, summary="My speed in a project")
    def get(self, request, slug: str):
        project = _annotated_project(request, slug)
        speed = annotator_speed(project=project, annotator=request.user)
        return ApiResponse(self.OutputSerializer(speed).data)


_VOTE_FIELDS = frozenset({"choice", "value", "rationale", "time_on_task_ms", "next"})
_INT64 = 2**63


def vote_input(data) -> dict | None:
    """What ``VoteApi.InputSerializer`` validates ``data`` to, for the plain JSON every client
    sends (strings, integers, booleans, each in its range), or None for anything else, which
    the serializer then answers (its errors included). The vote's own check at a fraction of
    the serializer's cost; a test holds the two equal on every input it accepts."""
    if type(data) is not dict or not data.keys() <= _VOTE_FIELDS:
        return None
    if "choice" not in data and "value" not in data:
        return None
    valid: dict = {}
    if "choice" in data:
        choice = data["choice"]
        if type(choice) is not str or not (choice := choice.strip()) or text_refusal(choice):
            return None
        valid["choice"] = choice
    if "value" in data:
        value = data["value"]
        if type(value) is not int or not -_INT64 <= value < _INT64:
            return None
        valid["value"] = value
    rationale = data.get("rationale", "")
    if type(rationale) is not str:
        return None
    rationale = rationale.strip()
    if len(rationale) > MAX_RATIONALE_CHARS or text_refusal(rationale):
        return None
    valid["rationale"] = rationale
    if "time_on_task_ms" in data:
        ms = data["time_on_task_ms"]
        if ms is not None and (type(ms) is not int or not 0 <= ms <= MAX_TIME_ON_TASK_MS):
            return None
        valid["time_on_task_ms"] = ms
    wants_next = data.get("next", False)
    if type(wants_next) is not bool:
        return None
    valid["next"] = wants_next
    return valid


def _valid(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
