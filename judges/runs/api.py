"""Filter runs over the REST API: curators start and cancel runs, curators and researchers
watch them. Projects are fetched through annotation.core.access like every other endpoint."""

from __future__ import annotations

from drf_spectacular.utils import (
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, STAFF_ROLES, get_project_for_user
from annotation.pairs.selectors import pair_pks_by_external_id
from judges.core.access import get_run_for_user
from judges.core.api import BROKER_DOWN_RESPONSE
from judges.ensemble import DEFAULT_EASY_THRESHOLD
from judges.models import FilterRun, Judge, Verdict
from judges.roster.selectors import judges_for_project
from judges.runs.selectors import (
    REASONS_SHOWN,
    UNSEEN_PAIRS_SHOWN,
    filter_run_progress,
    filter_run_report,
)
from judges.runs.services import (
    filter_run_cancel,
    filter_run_create,
    filter_run_resume,
)


class JudgeProgressSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    queue = serializers.CharField()
    done = serializers.IntegerField()
    expected = serializers.IntegerField()
    ok = serializers.IntegerField()
    unparseable = serializers.IntegerField()
    error = serializers.IntegerField()
    abstain = serializers.IntegerField()
    skipped = serializers.IntegerField(
        help_text="Pairs holding a kind of part the judge is not sent (video, audio): never "
        "called, not votes."
    )


class ReasonSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=[o for o in Verdict.Outcome.values if o != "ok"])
    reason = serializers.CharField()
    count = serializers.IntegerField()


class UnseenPairSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField()
    reasons = serializers.ListField(child=serializers.CharField())


class UnseenSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    pairs = UnseenPairSerializer(many=True, help_text=f"The first {UNSEEN_PAIRS_SHOWN}, by id.")


class JudgeReportSerializer(JudgeProgressSerializer):
    reasons = ReasonSerializer(
        many=True,
        help_text=f"Why its calls gave no vote, the most frequent {REASONS_SHOWN} reasons.",
    )
    agreement = serializers.FloatField(allow_null=True)
    position_consistency = serializers.FloatField(allow_null=True)
    median_latency_ms = serializers.FloatField(allow_null=True)
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)


class ProgressSerializer(serializers.Serializer):
    done = serializers.IntegerField()
    expected = serializers.IntegerField()
    percent = serializers.IntegerField()
    stalled = serializers.BooleanField()
    last_verdict_at = serializers.DateTimeField(allow_null=True)
    judges = JudgeProgressSerializer(many=True)


class ReportSerializer(ProgressSerializer):
    judges = JudgeReportSerializer(many=True)
    stats_pending = serializers.BooleanField(
        help_text="Per-judge statistics of a large running run wait for its end."
    )
    unseen = UnseenSerializer(
        help_text="Pairs every judge skipped in both orders: no judge is sent their media."
    )
    pairs = inline_serializer(
        "FilterRunPairOutcome",
        fields={
            "pairs": serializers.IntegerField(),
            "easy": serializers.IntegerField(),
            "queued": serializers.IntegerField(),
            "returned": serializers.IntegerField(help_text="Over budget: imported again."),
            "no_votes": serializers.IntegerField(),
            "too_few_votes": serializers.IntegerField(
                allow_null=True,
                help_text="Not easy only for having fewer valid votes than min_valid_votes "
                "(null: a run finished before the setting).",
            ),
        },
        allow_null=True,
    )


class FilterRunSerializer(serializers.ModelSerializer):
    judges: serializers.SlugRelatedField[Judge] = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True
    )
    created_by = serializers.CharField(source="created_by.get_username", default=None)
    # A run goes by its number in its project everywhere: its pages, their URLs, the
    # messages, and here, where ``id`` (what a client puts in the run's URL) is that number.
    id = serializers.IntegerField(source="number", read_only=True)

    class Meta:
        model = FilterRun
        fields: tuple[str, ...] = (
            "id",
            "number",
            "status",
            "judges",
            "threshold",
            "min_valid_votes",
            "budget_per_task",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        )


class FilterRunListSerializer(FilterRunSerializer):
    progress = serializers.SerializerMethodField()

    class Meta(FilterRunSerializer.Meta):
        fields = (*FilterRunSerializer.Meta.fields, "progress")

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, run) -> dict:
        return ProgressSerializer(filter_run_progress(run)).data


class FilterRunDetailSerializer(FilterRunSerializer):
    progress = serializers.SerializerMethodField()

    class Meta(FilterRunSerializer.Meta):
        fields = (*FilterRunSerializer.Meta.fields, "progress")

    @extend_schema_field(ReportSerializer)
    def get_progress(self, run) -> dict:
        return ReportSerializer(filter_run_report(run)).data


class FilterRunListApi(APIView):
    class InputSerializer(serializers.Serializer):
        judges = serializers.ListField(
            child=serializers.SlugField(), min_length=1, help_text="Judge names."
        )
        threshold = serializers.FloatField(
            default=DEFAULT_EASY_THRESHOLD, min_value=0.5, max_value=1.0
        )
        budget_per_task = serializers.IntegerField(required=False, allow_null=True, min_value=1)
        min_valid_votes = serializers.IntegerField(
            required=False,
            allow_null=True,
            min_value=1,
            help_text="A pair is easy only with at least this many valid votes (skipped "
            "judges, errors and unparseable answers are none); null or left out: one per judge.",
        )
        pairs = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            help_text="External ids of imported pairs to judge; all imported pairs by default.",
        )

        def validate_judges(self, names: list[str]) -> list[Judge]:
            # Judges the project may not use are unknown here, so no name leaks across projects.
            available = judges_for_project(self.context["project"]).filter(name__in=names)
            judges = {judge.name: judge for judge in available}
            unknown = [name for name in names if name not in judges]
            if unknown:
                raise serializers.ValidationError(f"Unknown judges: {', '.join(unknown)}")
            return [judges[name] for name in dict.fromkeys(names)]

    @extend_schema(responses=FilterRunListSerializer(many=True))
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        runs = project.filter_runs.prefetch_related("judges").select_related("created_by")
        return ApiResponse(FilterRunListSerializer(runs, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={201: FilterRunDetailSerializer, 503: BROKER_DOWN_RESPONSE},
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        data = self.InputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        pair_ids = None
        if "pairs" in data.validated_data:
            external = data.validated_data["pairs"]
            found = pair_pks_by_external_id(project=project, external_ids=external)
            if missing := [e for e in external if e not in found]:
                raise serializers.ValidationError({"pairs": f"Unknown pairs: {missing[:20]}"})
            pair_ids = list(found.values())
        run = filter_run_create(
            project=project,
            judges=data.validated_data["judges"],
            threshold=data.validated_data["threshold"],
            budget_per_task=data.validated_data.get("budget_per_task"),
            min_valid_votes=data.validated_data.get("min_valid_votes"),
            created_by=request.user,
            pair_ids=pair_ids,
        )
        return ApiResponse(FilterRunDetailSerializer(run).data, status=status.HTTP_201_CREATED)


class FilterRunDetailApi(APIView):
    @extend_schema(responses=FilterRunDetailSerializer)
    def get(self, request, slug: str, number: int):
        run, _ = get_run_for_user(request.user, slug, number)
        return ApiResponse(FilterRunDetailSerializer(run).data)


class FilterRunCancelApi(APIView):
    @extend_schema(request=None, responses={200: FilterRunDetailSerializer})
    def post(self, request, slug: str, number: int):
        run, _ = get_run_for_user(request.user, slug, number, roles=CURATORS)
        if not filter_run_cancel(run=run, actor=request.user):
            raise serializers.ValidationError({"status": f"The run had already {run.status}."})
        return ApiResponse(FilterRunDetailSerializer(run).data)


class FilterRunResumeApi(APIView):
    @extend_schema(
        request=None, responses={200: FilterRunDetailSerializer, 503: BROKER_DOWN_RESPONSE}
    )
    def post(self, request, slug: str, number: int):
        run, _ = get_run_for_user(request.user, slug, number, roles=CURATORS)
        filter_run_resume(run=run)
        return ApiResponse(FilterRunDetailSerializer(run).data)
