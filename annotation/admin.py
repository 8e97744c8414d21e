"""Admin for operators (superusers only, see ``config/admin.py``): search and filters everywhere;
content, votes and media read-only, because a benchmark must show exactly what was imported and
what people answered. Every addition, change and deletion here is audited (docs/audit.md),
the site-wide rows of other apps' admins (accounts, second factors, sign-in identities, API
keys) included. Curators use the in-app project pages instead."""

from __future__ import annotations

from typing import ClassVar

from allauth.account.models import EmailAddress  # type: ignore[import-untyped]
from allauth.mfa.admin import AuthenticatorAdmin  # type: ignore[import-untyped]
from allauth.mfa.models import Authenticator  # type: ignore[import-untyped]
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken  # type: ignore[import-untyped]
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db.models import OuterRef, Subquery
from django.utils.html import format_html
from rest_framework.authtoken.models import TokenProxy

from annotation import models
from annotation.accounts.mfa import two_factor_audit
from annotation.audit import site_admin
from annotation.audit.admin import AuditedAdmin
from annotation.core.media_keys import media_path
from annotation.core.scales import LIKERT6_LABELS, on_screen_vote

THUMBNAIL_SIDE = 64  # px, in the media list
PREVIEW_SIDE = 480  # px, on a medium's own page


class ReadOnlyAdmin(AuditedAdmin):
    """Rows nobody adds or changes here; an operator may delete one (the audit log records
    it, with the project it belonged to)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class ViewOnlyAdmin(ReadOnlyAdmin):
    """Records that other rows or outcomes depend on: nothing added, changed or deleted."""

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0
    autocomplete_fields = ("user",)


@admin.register(models.Project)
class ProjectAdmin(AuditedAdmin):
    list_display = ("name", "slug", "scale", "overlap", "consensus_rule", "paused", "created_at")
    list_filter = ("scale", "consensus_rule", "paused")
    search_fields = ("name", "slug")
    prepopulated_fields: ClassVar = {"slug": ("name",)}
    inlines = (MembershipInline,)


@admin.register(models.Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ("user", "project", "role", "created_at")
    list_filter = ("role", "project")
    search_fields = ("user__username", "project__slug")
    autocomplete_fields = ("user", "project")


def _image(media: models.Media, side: int):
    """The served copy (the original without metadata) through the media view of a project
    that uses it (operators may see every project's), at most ``side`` px on its long side."""
    slug = getattr(media, "preview_slug", None)
    if slug is None:
        return "—"
    scale = min(1.0, side / max(media.width or side, media.height or side, 1))
    return format_html(
        '<img src="{}" alt="" width="{}" height="{}" loading="lazy">',
        media_path(slug=slug, sha256=media.sha256),
        max(1, round((media.width or side) * scale)),
        max(1, round((media.height or side) * scale)),
    )


@admin.register(models.Media)
class MediaAdmin(ReadOnlyAdmin):
    list_display = ("thumbnail", "sha256", "format", "width", "height", "size_bytes", "created_at")
    list_filter = ("format",)
    search_fields = ("sha256",)
    readonly_fields = ("preview",)

    def get_queryset(self, request):
        first_project = models.ProjectMedia.objects.filter(media=OuterRef("pk")).order_by("pk")
        return (
            super()
            .get_queryset(request)
            .annotate(preview_slug=Subquery(first_project.values("project__slug")[:1]))
        )

    @admin.display(description="Image")
    def thumbnail(self, media: models.Media):
        return _image(media, THUMBNAIL_SIDE)

    @admin.display(description="Preview")
    def preview(self, media: models.Media):
        return _image(media, PREVIEW_SIDE)


@admin.register(models.Prompt)
class PromptAdmin(ReadOnlyAdmin):
    list_display = ("id", "project", "source")
    list_filter = ("project",)
    search_fields = ("id", "source")


@admin.register(models.Response)
class ResponseAdmin(ReadOnlyAdmin):
    list_display = ("id", "project", "model_name")
    list_filter = ("project", "model_name")
    search_fields = ("id", "model_name")


class PriorAnnotationInline(admin.TabularInline):
    model = models.PriorAnnotation
    extra = 0
    can_delete = False
    readonly_fields = ("position", "value", "label")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Pair)
class PairAdmin(AuditedAdmin):
    list_display = (
        "external_id",
        "project",
        "task",
        "status",
        "priority",
        "vote_count",
        "target_votes",
        "ensemble_label",
        "consensus_label",
    )
    list_filter = ("project", "status", "task", "is_gold")
    search_fields = ("external_id", "criterion")
    list_select_related = ("project",)
    # Content and outcomes are fixed by import, judges and votes; only the queue is steered.
    readonly_fields = (
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
    )
    inlines = (PriorAnnotationInline,)

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.ImportJob)
class ImportJobAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "project",
        "filename",
        "status",
        "created_pairs",
        "existing_pairs",
        "created_at",
    )
    list_filter = ("status", "project")
    search_fields = ("filename",)


@admin.register(models.Vote)
class VoteAdmin(ReadOnlyAdmin):
    list_display = (
        "pair",
        "annotator",
        "as_shown",
        "shown",
        "side",
        "value",
        "is_extra",
        "created_at",
    )
    list_filter = ("side", "is_extra", "pair__project")
    search_fields = ("pair__external_id", "annotator__username")
    list_select_related = ("pair__project", "annotator")

    @admin.display(description="Vote as the annotator saw it")
    def as_shown(self, vote: models.Vote) -> str:
        """The choice in the annotator's on-screen terms (left, right, tie; likert6 1 = left
        much better), as the comparison page offered it."""
        shown = on_screen_vote(
            scale=vote.pair.project.scale,
            left_is_a=vote.left_is_a,
            side=vote.side,
            value=vote.value,
        )
        if shown["value"] is not None:
            return f"{shown['value']} · {LIKERT6_LABELS[shown['value'] - 1]}"
        return shown["choice"]

    @admin.display(description="Shown")
    def shown(self, vote: models.Vote) -> str:
        return "A left, B right" if vote.left_is_a else "B left, A right"


@admin.register(models.Skip)
class SkipAdmin(ReadOnlyAdmin):
    list_display = ("pair", "annotator", "reason", "created_at")
    list_filter = ("reason", "pair__project")
    search_fields = ("pair__external_id", "annotator__username", "note")


@admin.register(models.Flag)
class FlagAdmin(ReadOnlyAdmin):
    """Flags are answered on the pair page (docs/curators.md, "Flags"); here they are read."""

    list_display = ("pair", "annotator", "kind", "created_at", "resolved_at")
    list_filter = ("kind", "pair__project")
    search_fields = ("pair__external_id", "annotator__username", "note")


@admin.register(models.Release)
class ReleaseAdmin(ViewOnlyAdmin):
    """Releases are made, built and published by their services (docs/releases.md); here they
    are only read. A published one never changes anyway (the model layer refuses)."""

    list_display = ("project", "version", "status", "pair_count", "created_at", "published_at")
    list_filter = ("status", "project")
    search_fields = ("version", "project__slug")
    list_select_related = ("project",)


@admin.register(models.Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    """Curators invite, resend and revoke on Settings; the key, half of a working link, is
    never shown."""

    list_display = (
        "email",
        "project",
        "role",
        "sent_at",
        "expires_at",
        "accepted_at",
        "revoked_at",
    )
    list_filter = ("role", "project")
    search_fields = ("email", "project__slug")
    exclude = ("key",)


admin.site.unregister(Authenticator)


@admin.register(Authenticator)
class AuditedAuthenticatorAdmin(AuthenticatorAdmin):
    """Second factors (docs/sso.md): an operator deletes one for a lost phone, which the audit
    log records as that user's two-factor login turned off by the operator. Nobody adds or
    changes one here: they hold the user's secret and are set up by the user."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def delete_model(self, request, obj) -> None:
        two_factor_audit(actor=request.user, authenticator=obj, on=False)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        for authenticator in queryset.select_related("user"):
            two_factor_audit(actor=request.user, authenticator=authenticator, on=False)
        super().delete_queryset(request, queryset)


# The site-wide rows other apps' admins change, audited (annotation/audit/site_admin.py).
for model, audited in (
    (User, site_admin.AuditedUserAdmin),
    (Group, site_admin.AuditedGroupAdmin),
    (EmailAddress, site_admin.AuditedEmailAddressAdmin),
    (SocialAccount, site_admin.AuditedSocialAccountAdmin),
    (SocialApp, site_admin.AuditedSocialAppAdmin),
    (SocialToken, site_admin.AuditedSocialTokenAdmin),
    (TokenProxy, site_admin.AuditedTokenAdmin),
):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, audited)
