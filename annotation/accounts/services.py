"""Accounts: a one-time password (given to a member added on Settings) must be changed at
first login, and anyone may change their password on the account page (docs/curators.md,
"Accounts"), and the API tokens listed, made and revoked there (docs/api.md,
"Authentication")."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.accounts.mfa import mfa_enabled, mfa_required
from annotation.audit.services import audit_record
from annotation.core.errors import NotFound
from annotation.models import ApiToken, OneTimePassword
from annotation.models.tokens import NAMED_TOKEN_PREFIX, TOKEN_NAME_MAX_CHARS, key_digest

MFA_FIRST = "Set up two-factor login first: your role requires it before you make an API token."


def account_sessions_end(*, user: User, keep: str | None = None) -> int:
    """Ends ``user``'s sessions (signs them out everywhere) but the one keyed ``keep``; returns
    how many ended. Reads every live session: for rare events (linking an account)."""
    ended = []
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.session_key == keep:
            continue
        if str(session.get_decoded().get("_auth_user_id")) == str(user.pk):
            ended.append(session.session_key)
    Session.objects.filter(session_key__in=ended).delete()
    return len(ended)


def one_time_password_mark(*, user: User) -> None:
    """Marks ``user``'s current password as one-time: it must be changed at first login.
    Caller has just saved the generated password."""
    OneTimePassword.objects.update_or_create(user=user, defaults={"password": user.password})


def password_change_required(*, user: User) -> bool:
    """Whether ``user`` still logs in with the one-time password they were given."""
    return OneTimePassword.objects.filter(user=user, password=user.password).exists()


@transaction.atomic
def account_password_change(*, user: User, password: str) -> None:
    """Sets ``user``'s own new password, checked by the password validators; the one-time
    mark goes with the old one."""
    validate_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    OneTimePassword.objects.filter(user=user).delete()


@transaction.atomic
def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """A named API token for ``user`` and its key, which is shown once and never stored
    (only its sha256); it expires after ``ARBITER_API_TOKEN_DAYS`` when that is set. Refused
    while ``ARBITER_MFA_REQUIRED_FOR`` requires two-factor login of ``user`` and they have not
    set it up (a token must not sidestep it)."""
    if mfa_required(user) and not mfa_enabled(user):
        raise ValidationError(MFA_FIRST)
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the token a name (what or who uses it)."})
    if len(name) > TOKEN_NAME_MAX_CHARS:
        raise ValidationError({"name": f"At most {TOKEN_NAME_MAX_CHARS} characters."})
    key = NAMED_TOKEN_PREFIX + secrets.token_urlsafe(32)
    days = settings.ARBITER_API_TOKEN_DAYS
    expires_at = timezone.now() + timedelta(days=days) if days else None
    token = ApiToken.objects.create(
        user=user,
        name=name,
        key_digest=key_digest(key),
        key_start=key[:12],
        expires_at=expires_at,
    )
    after = {"name": name, "key_start": token.key_start, "expires_at": expires_at}
    _audit_token(user, token, "api_token.created", {}, after)
    return token, key


def _audit_token(user: User, token: ApiToken | None, action: str, before: dict, after: dict):
    """A token's event, site-wide (tokens belong to the account); never the key."""
    audit_record(
        actor=user,
        project=None,
        action=action,
        target=token,
        target_type=None if token is not None else "token",
        target_label=str(token) if token is not None else "command-line token",
        before=before,
        after=after,
    )


@transaction.atomic
def api_token_revoke(*, user: User, token_id: int) -> ApiToken:
    """Revokes one of ``user``'s named tokens (kept, marked revoked: it answers 401 from now
    on); another user's token is not found."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is None:
        raise NotFound("No such token")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        after = {"revoked_at": token.revoked_at}
        _audit_token(user, token, "api_token.revoked", {"revoked_at": None}, after)
    return token


@transaction.atomic
def command_line_token_revoke(*, user: User) -> bool:
    """Deletes ``user``'s command-line token (``drf_create_token``); False when none."""
    deleted, _ = Token.objects.filter(user=user).delete()
    if deleted:
        _audit_token(user, None, "api_token.revoked", {"command_line_token": True}, {})
    return bool(deleted)
