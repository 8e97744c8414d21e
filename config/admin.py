"""The Django admin is for operators: only active superusers get in. Curators manage their
projects on the in-app pages (queue, imports, settings), where every view checks the project."""

from __future__ import annotations

from allauth.mfa.models import Authenticator
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError

SIGN_IN_ON_SITE = (
    "Sign in on the site's login page: it asks for your two-factor code (docs/sso.md)."
)


def is_operator(user) -> bool:
    return user.is_active and user.is_superuser


class OperatorAuthenticationForm(AdminAuthenticationForm):
    """The admin's login form, refusing anyone who is not an operator."""

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if not is_operator(user):
            raise ValidationError(
                self.error_messages["invalid_login"],
                code="invalid_login",
                params={"username": self.username_field.verbose_name},
            )
        # This form signs in with a password alone: a second factor is asked for on the site's
        # login page, and passwords switched off are off here too.
        if not settings.ARBITER_LOCAL_PASSWORDS or Authenticator.objects.filter(user=user).exists():
            raise ValidationError(SIGN_IN_ON_SITE, code="mfa")


class OperatorAdminSite(admin.AdminSite):
    site_header = "Arbiter operations"
    login_form = OperatorAuthenticationForm

    def has_permission(self, request) -> bool:
        return is_operator(request.user)
