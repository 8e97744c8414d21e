"""Admin for curators: search and filters everywhere; content, votes and media read-only,
because a benchmark must show exactly what was imported and what people answered."""

from __future__ import annotations

from django.contrib import admin

from annotation import models


def curated_project_ids(user) -> list[int]:
    return list(
        models.Membership.objects.filter(user=user, role=models.Role.CURATOR).values_list(
            "project_id", flat=True
        )
    )


class ProjectScopedAdmin(admin.ModelAdmin):
    """A curator sees only the projects they curate; superusers see everything."""

    project_path = "project"

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.project_path}__in": curated_project_ids(request.user)})


class ReadOnlyAdmin(ProjectScopedAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(models.Project)
class ProjectAdmin(ProjectScopedAdmin):
    project_path = "pk"

    list_display = ["name", "slug", "scale", "overlap", "consensus_rule", "paused", "created_at"]
    list_filter = ["scale", "consensus_rule", "paused"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(models.Membership)
class MembershipAdmin(ProjectScopedAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__slug"]
    autocomplete_fields = ["user", "project"]


@admin.register(models.Media)
class MediaAdmin(ReadOnlyAdmin):
    def get_queryset(self, request):
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return queryset
        used = models.ProjectMedia.objects.filter(project__in=curated_project_ids(request.user))
        return queryset.filter(pk__in=used.values("media_id"))

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
class PairAdmin(ProjectScopedAdmin):
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
    # Content and outcomes are fixed by import, judges and votes; curators steer the queue.
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
    project_path = "pair__project"
    list_display = ["pair", "annotator", "side", "value", "is_extra", "created_at"]
    list_filter = ["side", "is_extra", "pair__project"]
    search_fields = ["pair__external_id", "annotator__username"]
    list_select_related = ["pair", "annotator"]


@admin.register(models.Skip)
class SkipAdmin(ReadOnlyAdmin):
    project_path = "pair__project"
    list_display = ["pair", "annotator", "reason", "created_at"]
    list_filter = ["reason", "pair__project"]
    search_fields = ["pair__external_id", "annotator__username", "note"]
