"""Accounts: a one-time password (given to a member added on Settings) must be changed at
first login, and anyone may change their password on the account page (docs/curators.md,
"Accounts")."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.db import transaction

from annotation.models import OneTimePassword


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
