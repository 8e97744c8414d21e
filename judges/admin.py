"""Judge admin, for operators only: a judge decides which URL a worker calls and which
environment variable it sends there, so only superusers add, change or delete one. No key is
stored, and no page says whether a variable is set. Filter runs and verdicts are records of
what the judges answered: read-only (curators start and cancel runs on the project pages)."""

from __future__ import annotations

import copy
from typing import ClassVar

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import construct_instance

from annotation.admin import ViewOnlyAdmin
from annotation.audit.admin import AuditedAdmin
from judges.models import FilterRun, Judge, Verdict
from judges.roster.services import OPTIONS_HELP, judge_check

# An OpenAI-compatible judge's settings, and a reward-model judge's.
ENDPOINT_FIELDS = (
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "timeout_s",
    "concurrency",
    "requests_per_minute",
    "max_image_side",
    "video_frames",
    "video_frame_side",
    "takes_audio",
)
REWARD_MODEL_FIELDS = ("checkpoint", "device", "batch_size")
JUDGE_FIELDS = [
    "name",
    "kind",
    "enabled",
    *ENDPOINT_FIELDS,
    *REWARD_MODEL_FIELDS,
    "options",
    "projects",
]


class JudgeAdminForm(forms.ModelForm):
    class Meta:
        model = Judge
        fields = JUDGE_FIELDS
        help_texts: ClassVar = {"options": OPTIONS_HELP}

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        candidate = construct_instance(self, copy.copy(self.instance))
        try:
            judge_check(candidate)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                for message in messages:
                    self.add_error(field if field in self.fields else None, message)
        return cleaned


@admin.register(Judge)
class JudgeAdmin(AuditedAdmin):
    form = JudgeAdminForm
    list_display = ("name", "kind", "enabled", "model", "api_key_env", "queue", "created_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "model", "base_url")
    readonly_fields = ("queue", "created_at")
    filter_horizontal = ("projects",)
    fieldsets = (
        (None, {"fields": ["name", "kind", "enabled", "queue", "created_at"]}),
        ("Available to", {"fields": ["projects"]}),
        ("OpenAI-compatible endpoint", {"fields": ENDPOINT_FIELDS}),
        ("Reward model", {"fields": REWARD_MODEL_FIELDS}),
        ("Kind-specific options", {"fields": ["options"]}),
    )

    # Superusers only, whatever permissions a staff user was given: the model permissions
    # would let a curator point a shared judge, and its key, at a server of their own.
    def has_add_permission(self, request) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser


@admin.register(FilterRun)
class FilterRunAdmin(ViewOnlyAdmin):
    list_display = (
        "number",
        "project",
        "status",
        "threshold",
        "min_valid_votes",
        "budget_per_task",
        "created_by",
    )
    list_display_links = ("number", "project")
    list_filter = ("status", "project")
    search_fields = ("project__slug", "error")
    list_select_related = ("project", "created_by")
    exclude = ("pairs",)  # thousands of pairs: their verdicts list them


@admin.register(Verdict)
class VerdictAdmin(ViewOnlyAdmin):
    list_display = ("pair", "judge", "run", "order", "outcome", "side", "latency_ms", "created_at")
    list_filter = ("outcome", "order", "judge", "run__project")
    search_fields = ("pair__external_id", "judge__name", "reasoning")
    list_select_related = ("pair", "judge", "run__project")
    raw_id_fields = ("run", "pair")
