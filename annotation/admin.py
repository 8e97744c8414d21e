"""Admin for operators (superusers only, see ``config/admin.py``): search and filters everywhere;
content, votes and media read-only, because a benchmark must show exactly what was imported and
what people answered. Curators use the in-app project pages instead."""

from __future__ import annotations

from django.contrib import admin

from annotation import models


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(models.Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "scale", "overlap", "consensus_rule", "paused", "created_at"]
    list_filter = ["scale", "consensus_rule", "paused"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__slug"]
    autocomplete_fields = ["user", "project"]


@admin.register(models.Media)
class MediaAdmin(ReadOnlyAdmin):
    list_display = ["sha256", "format", "width", "height", "size_bytes", "created_at"]
    list_filter = ["format"]
    search_fields = ["sha256"]


@admin.register(models.Prompt)
class PromptAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "source"]
    list_filter = ["project"]
    search_fields = ["id", "source"]


@admin.register(models.Response)
class ResponseAdmin(ReadOnlyAdmin):
    list_display = ["id", "project", "model_name"]
    list_filter = ["project", "model_name"]
    search_fields = ["id", "model_name"]


class PriorAnnotationInline(admin.TabularInline):
    model = models.PriorAnnotation
    extra = 0
    can_delete = False
    readonly_fields = ["position", "value", "label"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = [
        "external_id",
        "project",
        "task",
        "status",
        "priority",
        "vote_count",
        "target_votes",
        "ensemble_label",
        "consensus_label",
    ]
    list_filter = ["project", "status", "task", "is_gold"]
    search_fields = ["external_id", "criterion"]
    list_select_related = ["project"]
    # Content and outcomes are fixed by import, judges and votes; only the queue is steered.
    readonly_fields = [
        "project",
        "external_id",
        "prompt",
        "response_a",
        "response_b",
        "criterion",
        "task",
        "metadata",
        "prior_label",
        "ensemble_label",
        "ensemble_agreement",
        "ensemble_summary",
        "consensus_label",
        "vote_count",
        "created_at",
        "updated_at",
    ]
    inlines = [PriorAnnotationInline]

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.ImportJob)
class ImportJobAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "project",
        "filename",
        "status",
        "created_pairs",
        "existing_pairs",
        "created_at",
    ]
    list_filter = ["status", "project"]
    search_fields = ["filename"]


@admin.register(models.Vote)
class VoteAdmin(ReadOnlyAdmin):
    list_display = ["pair", "annotator", "side", "value", "is_extra", "created_at"]
    list_filter = ["side", "is_extra", "pair__project"]
    search_fields = ["pair__external_id", "annotator__username"]
    list_select_related = ["pair", "annotator"]


@admin.register(models.Skip)
class SkipAdmin(ReadOnlyAdmin):
    list_display = ["pair", "annotator", "reason", "created_at"]
    list_filter = ["reason", "pair__project"]
    search_fields = ["pair__external_id", "annotator__username", "note"]
