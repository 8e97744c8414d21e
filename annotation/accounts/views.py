"""The account page: anyone signed in changes their own password here, and a member given a
one-time password is sent here until they do (annotation.accounts.password_change)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import authenticate, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from annotation.accounts.password_change import SESSION_KEY, password_change_done
from annotation.accounts.services import account_password_change

PAGE = "annotation/account.html"


class AccountPasswordForm(PasswordChangeForm):
    """Django's password change form (the password validators included), with the current
    password checked through ``authenticate`` so wrong guesses count towards the login
    lockout (django-axes) like wrong passwords at the login page."""

    def __init__(self, user, *args, request, **kwargs):
        self.request = request
        super().__init__(user, *args, **kwargs)

    def clean_old_password(self) -> str:
        old_password = self.cleaned_data["old_password"]
        username = self.user.get_username()
        if authenticate(self.request, username=username, password=old_password) is None:
            raise forms.ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        return old_password


def _next_url(request) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if safe else ""


@never_cache
@sensitive_post_parameters("old_password", "new_password1", "new_password2")
@require_http_methods(["GET", "POST"])
@login_required
def account(request):
    required = bool(request.session.get(SESSION_KEY))
    form = AccountPasswordForm(request.user, request.POST or None, request=request)
    if form.is_valid():
        try:
            account_password_change(user=request.user, password=form.cleaned_data["new_password1"])
        except ValidationError as exc:
            form.add_error("new_password1", exc)
        else:
            update_session_auth_hash(request, request.user)
            password_change_done(request)
            messages.success(request, "Your password has been changed.")
            return redirect(_next_url(request) or "home")
    context = {"form": form, "required": required, "next": _next_url(request)}
    return render(request, PAGE, context, status=400 if form.is_bound else 200)
