"""The account page: anyone signed in changes their own password here, and a member given a
one-time password is sent here until they do (annotation.accounts.password_change)."""

from __future__ import annotations

from allauth.mfa.models import Authenticator  # type: ignore[import-untyped]
from allauth.mfa.totp.internal.auth import TOTP  # type: ignore[import-untyped]
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import authenticate, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from annotation.accounts.authentication import past_token_days
from annotation.accounts.login import refuse_without_local_passwords
from annotation.accounts.mfa import mfa_enabled
from annotation.accounts.password_change import SESSION_KEY, password_change_done
from annotation.accounts.services import (
    account_password_change,
    api_token_create,
    api_token_revoke,
    command_line_token_revoke,
)
from annotation.core.errors import NotFound
from annotation.models import ApiToken
from annotation.models.tokens import TOKEN_NAME_MAX_CHARS

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
    if request.method == "POST" and (refused := refuse_without_local_passwords(request)):
        return refused
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
    return _page(request, context, status=400 if form.is_bound else 200)


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=TOKEN_NAME_MAX_CHARS,
        help_text="What or who uses it: a script, a notebook, a scripted annotator.",
    )
    code = forms.CharField(
        label="Two-factor code",
        max_length=16,
        help_text="The 6-digit code your authenticator app shows now.",
    )

    def __init__(self, *args, user, **kwargs):
        """With two-factor login on, a token needs a current code from the authenticator."""
        super().__init__(*args, **kwargs)
        self.authenticator = Authenticator.objects.filter(
            user=user, type=Authenticator.Type.TOTP
        ).first()
        if self.authenticator is None:
            del self.fields["code"]

    def clean_code(self) -> str:
        code = self.cleaned_data["code"].strip()
        if not TOTP(self.authenticator).validate_code(code):
            raise forms.ValidationError("Incorrect code: enter the one your app shows now.")
        return code


def _page(request, context: dict, *, status: int = 200):
    """The account page: the password form and the user's API tokens."""
    context.setdefault("form", AccountPasswordForm(request.user, request=request))
    context.setdefault("token_form", TokenForm(user=request.user))
    context["api_tokens"] = ApiToken.objects.filter(user=request.user)
    command_line = Token.objects.filter(user=request.user).first()
    context["command_line_token"] = command_line
    context["command_line_expired"] = bool(command_line and past_token_days(command_line.created))
    context["token_days"] = settings.ARBITER_API_TOKEN_DAYS
    context["mfa_enabled"] = mfa_enabled(request.user)
    context["local_passwords"] = settings.ARBITER_LOCAL_PASSWORDS
    return render(request, PAGE, context, status=status)


@never_cache
@require_http_methods(["POST"])
@login_required
def api_token_new(request):
    """Makes a named token and shows its key on this answer only; with two-factor login on, a
    current code is asked for too (a stolen session alone makes no token)."""
    form = TokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return _page(request, {"token_form": form}, status=400)
    try:
        token, key = api_token_create(user=request.user, name=form.cleaned_data["name"])
    except ValidationError as exc:
        form.add_error(None, exc)
        return _page(request, {"token_form": form}, status=400)
    return _page(request, {"new_token": token, "new_key": key})


@require_http_methods(["POST"])
@login_required
def api_token_revoke_view(request, token_id: int):
    try:
        token = api_token_revoke(user=request.user, token_id=token_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    messages.success(request, f"Token {token.name!r} was revoked.")
    return redirect("account")


@require_http_methods(["POST"])
@login_required
def command_line_token_revoke_view(request):
    if command_line_token_revoke(user=request.user):
        messages.success(request, "Your command-line token was revoked.")
    return redirect("account")
