"""Single sign-on with OpenID Connect (docs/sso.md): allauth's provider, its accounts keyed by
(issuer, subject), and which existing account a first sign-in may take."""

from __future__ import annotations

from allauth.socialaccount.providers.openid_connect.provider import OpenIDConnectProvider  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.urls import reverse


class IssuerOpenIDConnectProvider(OpenIDConnectProvider):
    """allauth's OpenID Connect provider with each account's uid ``<issuer>#<subject>``: a
    subject is unique only at its issuer, so another issuer's user with the same subject never
    signs in as someone else (an issuer URL has no fragment, so ``#`` separates them)."""

    def extract_uid(self, data) -> str:
        return f"{self.app.settings['server_url']}#{super().extract_uid(data)}"


def sso_enabled() -> bool:
    return bool(settings.ARBITER_OIDC_ISSUER)


def sso_login_url() -> str:
    """Where the "Sign in with ..." buttons post (allauth's login view for the provider)."""
    return reverse("openid_connect_login", kwargs={"provider_id": settings.OIDC_PROVIDER_ID})


class AmbiguousEmail(Exception):
    """More than one account has the email a first sign-in brings."""


def sso_account_for_email(*, email: str, verified: bool) -> User | None:
    """The existing account a first sign-in links to: the one account whose email is ``email``,
    when the provider marks it verified; None when there is none (or it is unverified), and
    ``AmbiguousEmail`` when several accounts have it."""
    if not email or not verified:
        return None
    matches = list(get_user_model().objects.filter(email__iexact=email)[:2])
    if len(matches) > 1:
        raise AmbiguousEmail(email)
    return matches[0] if matches else None
