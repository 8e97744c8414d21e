"""API token authentication in one prepared statement: DRF's ``TokenAuthentication``, with
the token and its user read by a statement PostgreSQL planned once per connection instead of
an ORM query compiled on every request (docs/architecture.md, "The annotators' hot path").
The same answers: 401 "Invalid token." for an unknown key, "User inactive or deleted." for an
inactive user; the NUL and header checks are DRF's own."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from annotation.core.prepared import ModelColumns, execute_prepared

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
    return (user, token)
