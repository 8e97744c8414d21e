"""Invitations (docs/curators.md, "Inviting members"): a curator invites an email address with a
role; the mail's link (the invitation's random key, signed) works until the invitation expires
(``ARBITER_INVITATION_DAYS``) and once. Accepting it makes the account, or takes the one that
already has the email (its owner signed in: the link never sets the password of an existing
account), and gives it the role. Resending draws a new key, so the older link stops
working; revoking closes the invitation."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from annotation.audit.actions import SECRET_CHANGED
from annotation.audit.services import audit_record
from annotation.core.mail import absolute_url, mail_queue
from annotation.models import Invitation, Membership, Project, Role
from annotation.projects.services import member_add

_SALT = "arbiter.invitation"
KEY_BYTES = 32
MAIL_TEMPLATE = "annotation/mail/invitation.txt"
EXISTING_ACCOUNT = "An account with the email {email} exists: sign in to it, then accept."


class InvitationClosed(Exception):
    """The invitation was accepted, revoked or has expired; ``state`` says which."""

    def __init__(self, state: str):
        self.state = state
        super().__init__(f"This invitation is {state}.")


def invitation_token(invitation: Invitation) -> str:
    return signing.Signer(salt=_SALT).sign(invitation.key)


def invitation_for_token(token: str) -> Invitation | None:
    """The invitation a link names, or None when the link was not made by this site or its
    invitation has been resent since (whatever its state)."""
    try:
        key = signing.Signer(salt=_SALT).unsign(token)
    except signing.BadSignature:
        return None
    return Invitation.objects.select_related("project").filter(key=key).first()


def invitation_accounts(invitation: Invitation) -> list[User]:
    """The accounts that already have the invited email (letter case aside): one of them,
    signed in, accepts; never an account whose username merely looks like the email."""
    return list(get_user_model().objects.filter(email__iexact=invitation.email).order_by("pk"))


def _check_invite(*, project: Project, email: str, role: str) -> str:
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"email": f"{email!r} is not an email address."}) from None
    if role not in Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use one of {Role.values}."})
    email = get_user_model().objects.normalize_email(email)
    if Membership.objects.filter(project=project, user__email__iexact=email).exists():
        raise ValidationError({"email": f"{email} is already a member of this project."})
    open_invitation = Invitation.objects.filter(
        project=project, email__iexact=email, accepted_at=None, revoked_at=None
    )
    if open_invitation.exists():
        raise ValidationError(
            {"email": f"{email} is already invited: resend or revoke that invitation."}
        )
    return email


def _send(invitation: Invitation) -> None:
    """Draws a new key, restarts the validity and mails the link (after the commit)."""
    now = timezone.now()
    invitation.key = secrets.token_urlsafe(KEY_BYTES)
    invitation.sent_at = now
    invitation.expires_at = now + timedelta(days=settings.ARBITER_INVITATION_DAYS)
    invitation.save(update_fields=["key", "sent_at", "expires_at"])
    link = absolute_url(reverse("invitation", args=[invitation_token(invitation)]))
    body = render_to_string(
        MAIL_TEMPLATE,
        {"invitation": invitation, "link": link, "days": settings.ARBITER_INVITATION_DAYS},
    )
    mail_queue(to=invitation.email, subject=f"Invitation to {invitation.project.name}", body=body)


@transaction.atomic
def invitation_create(
    *, project: Project, email: str, role: str, invited_by: User | None
) -> Invitation:
    """Invites ``email`` to ``project`` with ``role`` and mails the link. Refused for a bad
    address or role, a member's address, or an address with an open invitation."""
    email = _check_invite(project=project, email=email.strip(), role=role)
    now = timezone.now()
    invitation = Invitation.objects.create(
        project=project,
        email=email,
        role=role,
        invited_by=invited_by,
        key=secrets.token_urlsafe(KEY_BYTES),
        sent_at=now,
        expires_at=now,
    )
    _send(invitation)
    _audit(invited_by, invitation, "invitation.created", {}, {"email": email, "role": role})
    return invitation


def _audit(actor, invitation: Invitation, action: str, before: dict, after: dict) -> None:
    """The invitation's event; never its key (the link)."""
    audit_record(
        actor=actor,
        project=invitation.project,
        action=action,
        target=invitation,
        target_label=invitation.email,
        before=before,
        after=after,
    )


def _locked(invitation: Invitation) -> Invitation:
    return Invitation.objects.select_for_update().select_related("project").get(pk=invitation.pk)


@transaction.atomic
def invitation_resend(*, invitation: Invitation, actor: User | None = None) -> Invitation:
    """Mails a new link (the older one stops working) valid for the full time again; for a
    pending or expired invitation."""
    invitation = _locked(invitation)
    if invitation.state in ("accepted", "revoked"):
        raise InvitationClosed(invitation.state)
    _send(invitation)
    _audit(actor, invitation, "invitation.resent", {}, {"link": SECRET_CHANGED})
    return invitation


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, actor: User | None = None) -> Invitation:
    """Closes a pending or expired invitation: its link says so from now on."""
    invitation = _locked(invitation)
    if invitation.state in ("accepted", "revoked"):
        raise InvitationClosed(invitation.state)
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    after = {"revoked_at": invitation.revoked_at}
    _audit(actor, invitation, "invitation.revoked", {"revoked_at": None}, after)
    return invitation


@transaction.atomic
def invitation_accept(
    *, invitation: Invitation, password: str | None, user: User | None = None
) -> Membership:
    """Accepts a pending invitation, once: ``user`` (the signed-in account that has the
    invited email), or else a new account made for the email with ``password``, refused
    (``ValidationError``) when an account has the email already. The caller checked that
    ``user`` is that account; ``password`` went through the validators. The audit
    log gets the membership's event (``member_add``) and the invitation's, both the account's."""
    invitation = _locked(invitation)
    if invitation.state != "pending":
        raise InvitationClosed(invitation.state)
    if user is None:
        if invitation_accounts(invitation):
            raise ValidationError({"email": EXISTING_ACCOUNT.format(email=invitation.email)})
        added = member_add(
            project=invitation.project,
            role=invitation.role,
            email=invitation.email,
            password=password,
            by_member=True,
        )
    else:
        added = member_add(
            project=invitation.project, role=invitation.role, username=user.username, by_member=True
        )
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = added.membership.user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    account = added.membership.user
    _audit(account, invitation, "invitation.accepted", {}, {"accepted_by": account.get_username()})
    return added.membership
