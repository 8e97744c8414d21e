"""allauth's adapters (docs/sso.md): how a sign-in through the OpenID provider finds or makes
its Arbiter account, and the project roles a groups claim gives. Roles stay Arbiter's: a new
account has none, and ``ARBITER_OIDC_GROUP_ROLES`` only adds the roles it names."""

from __future__ import annotations

import logging

from allauth.account.adapter import DefaultAccountAdapter  # type: ignore[import-untyped]
from allauth.account.utils import user_username  # type: ignore[import-untyped]
from allauth.core.exceptions import ImmediateHttpResponse  # type: ignore[import-untyped]
from allauth.mfa.adapter import DefaultMFAAdapter  # type: ignore[import-untyped]
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.db import transaction
from django.shortcuts import render

from annotation.accounts.mfa import mfa_required, remember_at_login
from annotation.accounts.services import account_sessions_end
from annotation.accounts.sso import AmbiguousEmail, sso_account_for_email, sso_link_refusal
from annotation.audit.services import audit_record
from annotation.models import Membership, Project
from annotation.projects.services import member_add

logger = logging.getLogger(__name__)
MODEL_BACKEND = f"{ModelBackend.__module__}.{ModelBackend.__qualname__}"
REFUSED_PAGE = "socialaccount/authentication_error.html"
AMBIGUOUS = (
    "More than one Arbiter account has the email {email}, so this sign-in cannot tell which is "
    "yours. Ask an operator to clear the email of the accounts that are not yours, then sign in "
    "again."
)


def _claims(sociallogin) -> dict:
    data = sociallogin.account.extra_data
    return {**data.get("id_token", {}), **data.get("userinfo", {})}


def _audit_sso_account(*, action: str, user, sociallogin, after: dict) -> None:
    """A first sign-in's account, linked or made, in the site-wide audit log as the user's own
    change: the provider's account id (``<issuer>#<subject>``), never a token."""
    audit_record(
        actor=user,
        project=None,
        action=action,
        target=user,
        target_label=user.get_username(),
        after={"provider_account": sociallogin.account.uid, **after},
    )


def sso_roles_grant(*, user, groups: list[str]) -> list[Membership]:
    """Gives ``user`` each role that ``ARBITER_OIDC_GROUP_ROLES`` maps one of ``groups`` to,
    in projects where they have no role yet (a role they have is Arbiter's to change). Each is
    recorded as ``member.added`` with no actor and a note naming the group."""
    granted = []
    for group in groups:
        for slug, role in settings.ARBITER_OIDC_GROUP_ROLES.get(group, []):
            project = Project.objects.filter(slug=slug).first()
            if project is None:
                logger.warning("ARBITER_OIDC_GROUP_ROLES names project %r, which is not here", slug)
                continue
            if Membership.objects.filter(project=project, user=user).exists():
                continue
            added = member_add(
                project=project,
                role=role,
                username=user.get_username(),
                note=f"single sign-on: the group {group!r} in ARBITER_OIDC_GROUP_ROLES",
            )
            granted.append(added.membership)
    return granted


def _refuse(request, message: str):
    return ImmediateHttpResponse(render(request, REFUSED_PAGE, {"refusal": message}, status=403))


def sso_link(*, request, sociallogin, user) -> None:
    """Links the provider's user to ``user``: with local passwords off its password stops
    working; its other sessions end (whoever else was signed in to it is signed out)."""
    if not settings.ARBITER_LOCAL_PASSWORDS and user.has_usable_password():
        user.set_unusable_password()
        user.save(update_fields=["password"])
    account_sessions_end(user=user, keep=request.session.session_key)
    sociallogin.connect(request, user)


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def pre_social_login(self, request, sociallogin) -> None:
        """A first sign-in takes the one account with the email the provider marks verified
        when Arbiter confirmed that email too (``sso_link_refusal``), is refused when several
        accounts have it or that account may not be taken, and otherwise makes a new account,
        which keeps the email only when it is verified."""
        if sociallogin.is_existing:
            return
        claims = _claims(sociallogin)
        email = str(claims.get("email") or "")
        verified = claims.get("email_verified") is True
        try:
            account = sso_account_for_email(email=email, verified=verified)
        except AmbiguousEmail:
            raise _refuse(request, AMBIGUOUS.format(email=email)) from None
        if account is not None:
            refusal = sso_link_refusal(user=account, email=email)
            if refusal:
                logger.warning("single sign-on refused to take account %s: %s", account.pk, refusal)
                raise _refuse(request, refusal)
            with transaction.atomic():
                sso_link(request=request, sociallogin=sociallogin, user=account)
                _audit_sso_account(
                    action="account.sso_linked",
                    user=account,
                    sociallogin=sociallogin,
                    after={"email": email},
                )
        elif not verified:
            sociallogin.email_addresses = []
            sociallogin.user.email = ""

    @transaction.atomic
    def save_user(self, request, sociallogin, form=None):
        """A first sign-in that found no account makes one (recorded as
        ``account.sso_created``)."""
        user = super().save_user(request, sociallogin, form)
        _audit_sso_account(
            action="account.sso_created",
            user=user,
            sociallogin=sociallogin,
            after={"username": user.get_username(), "email": user.email},
        )
        return user

    def is_open_for_signup(self, request, sociallogin) -> bool:
        return True

    def is_auto_signup_allowed(self, request, sociallogin) -> bool:
        return True


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        # Accounts are made by invitations, members added and single sign-on, never by
        # allauth's sign-up form (its URLs are not served).
        return False

    def populate_username(self, request, user) -> None:
        """A new account's username: the provider's ``preferred_username``, made unique, but
        never with an "@" (only the part before it), so it can never equal an email address
        (an invitation's or a member's)."""
        username = user_username(user) or ""
        if "@" in username:
            user_username(user, self.generate_unique_username([username, "user"]))
        super().populate_username(request, user)

    def login(self, request, user) -> None:
        if not hasattr(user, "backend"):
            user.backend = MODEL_BACKEND
        super().login(request, user)

    def post_login(self, request, user, **kwargs):
        sociallogin = (kwargs.get("signal_kwargs") or {}).get("sociallogin")
        claim = settings.ARBITER_OIDC_GROUPS_CLAIM
        if sociallogin is not None and claim:
            groups = _claims(sociallogin).get(claim) or []
            if isinstance(groups, list):
                sso_roles_grant(user=user, groups=[str(group) for group in groups])
                # A role just given may be one that requires two-factor login.
                remember_at_login(None, request, user)
        return super().post_login(request, user, **kwargs)

    def add_message(self, request, level, message_template=None, *args, **kwargs) -> None:
        # Signing in says nothing, as it did before allauth: the page the person asked for
        # is the answer.
        if message_template == "account/messages/logged_in.txt":
            return
        super().add_message(request, level, message_template, *args, **kwargs)

    def is_reauthentication_required(self, *, app: str, **kwargs) -> bool:
        # Adding a second factor needs no new sign-in; removing one is refused where it is
        # required (MFAAdapter), and otherwise is the signed-in user's own choice.
        return False


class MFAAdapter(DefaultMFAAdapter):
    def can_delete_authenticator(self, authenticator) -> bool:
        return not mfa_required(authenticator.user)
