"""Single sign-on with OpenID Connect (docs/sso.md): allauth's provider, its accounts keyed by
(issuer, subject), and which existing account a first sign-in may take."""

from __future__ import annotations

from allauth.account.models import EmailAddress  # type: ignore[import-untyped]
from allauth.socialaccount.models import SocialAccount  # type: ignore[import-untyped]
from allauth.socialaccount.providers.openid_connect.provider import OpenIDConnectProvider  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.urls import reverse

from annotation.models import Invitation

NOT_PROVEN = (
    "An Arbiter account has the email {email}, but Arbiter never confirmed that this email is "
    "that account's, so single sign-on does not take it over. Ask an operator to link it "
    '(docs/sso.md, "Linking an existing account"), then sign in again.'
)
OPERATOR = (
    "The Arbiter account with the email {email} is an operator's, which single sign-on never "
    "takes over. Ask another operator to link it, then sign in again."
)
LINKED = (
    "The Arbiter account with the email {email} is linked to another single sign-on user "
    "already. Ask an operator to check which account is yours."
)


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


def email_proven(*, user: User, email: str) -> bool:
    """Whether Arbiter confirmed that ``email`` is ``user``'s: the account accepted an
    invitation mailed to it, or it is an allauth email address marked verified (an operator's,
    in the Django admin)."""
    if not email:
        return False
    return (
        Invitation.objects.filter(accepted_by=user, email__iexact=email).exists()
        or EmailAddress.objects.filter(user=user, email__iexact=email, verified=True).exists()
    )


def sso_link_refusal(*, user: User, email: str) -> str | None:
    """Why a first sign-in bringing ``email`` may not take ``user`` (the one account with that
    email), or None when it may: never an operator's account, one linked to another subject, or
    one whose email Arbiter never confirmed."""
    if user.is_staff or user.is_superuser:
        return OPERATOR.format(email=email)
    if SocialAccount.objects.filter(user=user).exists():
        return LINKED.format(email=email)
    if not email_proven(user=user, email=email):
        return NOT_PROVEN.format(email=email)
    return None
