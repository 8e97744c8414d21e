"""Judge admin for curators. No key is ever stored, so none can be shown: the page names the
environment variable and says whether this web process has it set."""

from __future__ import annotations

import copy
import os

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import construct_instance

from judges.models import Judge
from judges.services.judges import OPTIONS_HELP, judge_check

JUDGE_FIELDS = [
    "name",
    "kind",
    "enabled",
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "timeout_s",
    "concurrency",
    "requests_per_minute",
    "max_image_side",
    "checkpoint",
    "device",
    "batch_size",
    "options",
]


class JudgeAdminForm(forms.ModelForm):
    class Meta:
        model = Judge
        fields = JUDGE_FIELDS
        help_texts = {"options": OPTIONS_HELP}

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
class JudgeAdmin(admin.ModelAdmin):
    form = JudgeAdminForm
    list_display = ["name", "kind", "enabled", "model", "api_key_env", "queue", "created_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "model", "base_url"]
    readonly_fields = ["queue", "api_key_status", "created_at"]
    fieldsets = [
        (None, {"fields": ["name", "kind", "enabled", "queue", "created_at"]}),
        (
            "OpenAI-compatible endpoint",
            {
                "fields": [
                    "base_url",
                    "model",
                    "api_key_env",
                    "api_key_status",
                    "temperature",
                    "max_tokens",
                    "timeout_s",
                    "concurrency",
                    "requests_per_minute",
                    "max_image_side",
                ]
            },
        ),
        ("Reward model", {"fields": ["checkpoint", "device", "batch_size"]}),
        ("Kind-specific options", {"fields": ["options"]}),
    ]

    @admin.display(description="API key variable")
    def api_key_status(self, judge: Judge) -> str:
        if not judge.api_key_env:
            return "none (no key is sent)"
        state = "set" if os.environ.get(judge.api_key_env) else "not set"
        return f"{judge.api_key_env}: {state} for the web server (workers read their own)"
