"""API token authentication in one prepared statement: DRF's ``TokenAuthentication``, with
the token and its user read by a statement PostgreSQL planned once per connection instead of
an ORM query compiled on every request (docs/architecture.md, "The annotators' hot path").
The same answers: 401 "Invalid token." for an unknown key, "User inactive or deleted." for an
inactive user; the NUL and header checks are DRF's own. A named token (``arb_...``, made on
the account page) is read by its sha256 instead; either is refused once older than
``ARBITER_API_TOKEN_DAYS``, a named one also once revoked (docs/api.md, "Authentication")."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from annotation.core.prepared import ModelColumns, execute_prepared
from annotation.models import ApiToken
from annotation.models.tokens import NAMED_TOKEN_PREFIX, key_digest

USER_COLUMNS = ModelColumns(get_user_model(), "u")
TOKEN_COLUMNS = ModelColumns(Token, "t")
_TOKEN_USER_SQL = (
    f"SELECT {TOKEN_COLUMNS.select_list()}, {USER_COLUMNS.select_list()} "
    f'FROM "{Token._meta.db_table}" t '
    f'JOIN "{get_user_model()._meta.db_table}" u ON u."id" = t."user_id" '
    'WHERE t."key" = %s'
)


class PreparedTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        if is_named_token(key):
            return named_token_user(key)
        with connection.cursor() as cursor:
            execute_prepared(cursor, "arbiter_token_user", _TOKEN_USER_SQL, [key])
            return token_user_checked(cursor.fetchone())


def token_user_checked(row) -> tuple:
    """(user, token) from a row that starts with ``TOKEN_COLUMNS`` then ``USER_COLUMNS``
    (None when no token has the key), with DRF's refusals."""
    if row is None:
        raise exceptions.AuthenticationFailed(_("Invalid token."))
    token = TOKEN_COLUMNS.load(row)
    user = USER_COLUMNS.load(row, TOKEN_COLUMNS.width)
    token.user = user
    if not user.is_active:
        raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
    if past_token_days(token.created):
        raise exceptions.AuthenticationFailed(_("Token has expired."))
    return (user, token)


def is_named_token(key: str) -> bool:
    """Whether ``key`` is a named token's (the account page's) rather than a command-line
    one."""
    return key.startswith(NAMED_TOKEN_PREFIX)


def past_token_days(created: datetime) -> bool:
    """Whether a token made at ``created`` is older than ``ARBITER_API_TOKEN_DAYS``."""
    days = settings.ARBITER_API_TOKEN_DAYS
    return bool(days) and created + timedelta(days=days) <= timezone.now()


def named_token_user(key: str) -> tuple:
    """(user, token) for a named token's key; 401 for an unknown, revoked or expired one."""
    token = ApiToken.objects.select_related("user").filter(key_digest=key_digest(key)).first()
    if token is None:
        raise exceptions.AuthenticationFailed(_("Invalid token."))
    if token.revoked_at is not None:
        raise exceptions.AuthenticationFailed(_("Token has been revoked."))
    if token.expired or past_token_days(token.created_at):
        raise exceptions.AuthenticationFailed(_("Token has expired."))
    if not token.user.is_active:
        raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
    return (token.user, token)
