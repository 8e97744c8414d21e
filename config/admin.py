"""The Django admin is for operators: only active superusers get in. Curators manage their
projects on the in-app pages (queue, imports, settings), where every view checks the project."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError


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


class OperatorAdminSite(admin.AdminSite):
    site_header = "Arbiter operations"
    login_form = OperatorAuthenticationForm

    def has_permission(self, request) -> bool:
        return is_operator(request.user)
