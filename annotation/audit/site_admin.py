"""The site-wide rows an operator can change in the admin, audited (docs/audit.md, "What is
recorded"): accounts (staff and superuser grants, emails, passwords as "(changed)"), groups,
sign-in identities (moving one to another account), sign-in providers and API keys (second
factors: ``annotation.admin``). Each subclasses its app's own admin with ``AuditedAdmin``;
``annotation.admin`` registers them in place of the originals. Their events are site-wide."""

from __future__ import annotations

from allauth.account.admin import EmailAddressAdmin  # type: ignore[import-untyped]
from allauth.socialaccount.admin import SocialAccountAdmin, SocialAppAdmin, SocialTokenAdmin  # type: ignore[import-untyped]
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.db import transaction
from rest_framework.authtoken.admin import TokenAdmin

from annotation.audit.actions import SECRET_CHANGED
from annotation.audit.admin import SECRET_FIELDS, AuditedAdmin


class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    """Accounts: the form's changes; a password an operator sets is recorded as changed."""

    def user_change_password(self, request, id, form_url=""):
        # ``log_change`` runs right after the new password is saved, in this transaction.
        request.arbiter_password_form = True
        with transaction.atomic():
            return super().user_change_password(request, id, form_url)

    def log_change(self, request, obj, message):
        if getattr(request, "arbiter_password_form", False):
            changed = "(disabled)" if not obj.has_usable_password() else SECRET_CHANGED
            self.audit_record(request, obj, "admin.changed", {}, {"password": changed})
        return super().log_change(request, obj, message)


class AuditedGroupAdmin(AuditedAdmin, GroupAdmin):
    pass


class AuditedEmailAddressAdmin(AuditedAdmin, EmailAddressAdmin):
    pass


class AuditedSocialAccountAdmin(AuditedAdmin, SocialAccountAdmin):
    """A sign-in identity: moving it to another account records ``user`` before and after;
    what the provider sent (``extra_data``) only as changed."""

    audit_secret_fields = SECRET_FIELDS | {"extra_data"}

    def audit_label(self, obj) -> str:
        return f"{obj.provider} {obj.uid}"


class AuditedSocialAppAdmin(AuditedAdmin, SocialAppAdmin):
    pass


class AuditedSocialTokenAdmin(AuditedAdmin, SocialTokenAdmin):
    def audit_label(self, obj) -> str:
        return f"token of {obj.account}"


class AuditedTokenAdmin(AuditedAdmin, TokenAdmin):
    """DRF's API keys: the key is the row's id, so the log names the key's owner instead."""

    def audit_label(self, obj) -> str:
        return f"API key of {obj.user}"

    def audit_record(self, request, obj, action, before, after, target_ref=None) -> None:
        super().audit_record(request, obj, action, before, after, str(obj.user_id))
