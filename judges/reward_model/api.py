"""Reward-model trainings over the REST API (docs/api.md): researchers and curators start
one from the project's consensus and read its progress and per-epoch metrics."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.strict import StrictInputSerializer
from judges.core.access import get_training_run_for_user
from judges.core.api import BROKER_DOWN_RESPONSE
from judges.models import TrainingRun
from judges.reward_model.options import DEVICES, FEATURE_KINDS, LIMITS, TrainingOptions
from judges.reward_model.report import heldout_report
from judges.reward_model.services import training_release, training_run_create

_DEFAULTS = TrainingOptions()


def _ranged(name: str) -> dict:
    low, high = LIMITS[name]
    return {"default": getattr(_DEFAULTS, name), "min_value": low, "max_value": high}


class EpochSerializer(serializers.Serializer):
    epoch = serializers.IntegerField()
    train_loss = serializers.FloatField()
    heldout_loss = serializers.FloatField()
    heldout_accuracy = serializers.FloatField()


class HeldoutSerializer(serializers.Serializer):
    """What the best held-out accuracy rests on (judges/reward_model/report.py)."""

    pairs = serializers.IntegerField(help_text="Held-out pairs the accuracy is measured on.")
    correct = serializers.IntegerField()
    accuracy = serializers.FloatField()
    interval = serializers.ListField(
        child=serializers.FloatField(), min_length=2, max_length=2, help_text="[low, high]"
    )
    confidence = serializers.FloatField()
    method = serializers.CharField(help_text="wilson: the Wilson score interval.")
    min_pairs = serializers.IntegerField(help_text="Below this many pairs, too_few is true.")
    too_few = serializers.BooleanField()
    warning = serializers.CharField(help_text="Why the accuracy says little, or empty.")


def checkpoint_shown(path: str) -> str:
    """Where the checkpoint is, as clients may see it: its path under ARBITER_CHECKPOINT_ROOT,
    never the server's absolute path (a checkpoint written elsewhere by the command line
    shows only its folder's and its own name)."""
    if not path:
        return ""
    if not Path(path).is_absolute():
        return Path(path).as_posix()  # a name in the bucket's checkpoints area
    checkpoint = Path(path).resolve()
    root = Path(settings.ARBITER_CHECKPOINT_ROOT).resolve()
    if checkpoint.is_relative_to(root):
        return checkpoint.relative_to(root).as_posix()
    return Path(checkpoint.parent.name, checkpoint.name).as_posix()


class TrainingRunSerializer(serializers.ModelSerializer):
    checkpoint = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.get_username", default=None)
    judge = serializers.CharField(source="judge.name", default=None)
    release = serializers.CharField(source="release.version", default=None)
    history = EpochSerializer(many=True)
    heldout = serializers.SerializerMethodField()

    class Meta:
        model = TrainingRun
        fields = (
            "id",
            "status",
            "progress",
            "phase",
            "source",
            "release",
            "source_info",
            "features",
            "epochs",
            "lr",
            "batch_size",
            "seed",
            "patience",
            "holdout",
            "device",
            "register_name",
            "history",
            "best_epoch",
            "heldout_accuracy",
            "heldout",
            "train_pairs",
            "heldout_pairs",
            "checkpoint",
            "judge",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        )

    @extend_schema_field(HeldoutSerializer(allow_null=True))
    def get_heldout(self, run: TrainingRun) -> dict | None:
        """The held-out count, the 95% interval and the too-few warning; null until done."""
        report = heldout_report(accuracy=run.heldout_accuracy, pairs=run.heldout_pairs)
        return report.as_dict() if report else None

    @extend_schema_field(serializers.CharField(help_text="Under ARBITER_CHECKPOINT_ROOT."))
    def get_checkpoint(self, run: TrainingRun) -> str:
        return checkpoint_shown(run.checkpoint)


class TrainingRunListApi(APIView):
    class InputSerializer(StrictInputSerializer):
        release = serializers.RegexField(
            r"^\d+\.\d+\.\d+$",
            required=False,
            default="",
            allow_blank=True,
            help_text="X.Y.Z: train on this built release's rows; the consensus by default.",
        )
        features = serializers.ChoiceField(choices=FEATURE_KINDS, default=_DEFAULTS.features)
        epochs = serializers.IntegerField(**_ranged("epochs"))
        lr = serializers.FloatField(**_ranged("lr"))
        batch_size = serializers.IntegerField(**_ranged("batch_size"))
        seed = serializers.IntegerField(**_ranged("seed"))
        patience = serializers.IntegerField(**_ranged("patience"))
        holdout = serializers.FloatField(**_ranged("holdout"))
        device = serializers.ChoiceField(choices=DEVICES, default=_DEFAULTS.device)
        register = serializers.SlugField(
            required=False,
            default="",
            allow_blank=True,
            max_length=80,
            help_text="Register the trained model as a reward_model judge of this name.",
        )

    @extend_schema(responses=TrainingRunSerializer(many=True))
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        runs = project.training_runs.select_related("judge", "created_by")
        return ApiResponse(TrainingRunSerializer(runs, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={201: TrainingRunSerializer, 503: BROKER_DOWN_RESPONSE},
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        register, version = fields.pop("register"), fields.pop("release")
        run = training_run_create(
            project=project,
            options=TrainingOptions(**fields),
            register_name=register,
            release=training_release(project, version) if version else None,
            created_by=request.user,
        )
        return ApiResponse(TrainingRunSerializer(run).data, status=status.HTTP_201_CREATED)


class TrainingRunDetailApi(APIView):
    @extend_schema(responses=TrainingRunSerializer)
    def get(self, request, slug: str, run_id: int):
        run, _ = get_training_run_for_user(request.user, slug, run_id)
        return ApiResponse(TrainingRunSerializer(run).data)
