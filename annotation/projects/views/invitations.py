"""Invitations: a project's curators invite, resend and revoke on the Settings page; the
invited person opens the mailed link, chooses a password for a new account (or signs in to the
account that already has the email: the link never sets an existing account's password) and
lands in the project, signed in through allauth's login stages."""

from __future__ import annotations

from allauth.account.utils import perform_login  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from annotation.accounts.login import sso_context
from annotation.core.access import CURATORS, get_project_for_user
from annotation.models import Invitation
from annotation.projects.invitations import (
    InvitationClosed,
    invitation_accept,
    invitation_accounts,
    invitation_create,
    invitation_for_token,
    invitation_resend,
    invitation_revoke,
)
from annotation.projects.views.settings import InviteForm, add_errors, render_settings

PAGE = "annotation/invitation.html"


@require_POST
@never_cache
@login_required
def invitation_send(request, slug: str):
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    form = InviteForm(request.POST)
    if form.is_valid():
        try:
            invitation = invitation_create(
                project=project, invited_by=request.user, **form.cleaned_data
            )
        except ValidationError as exc:
            add_errors(form, exc, {})
        else:
            messages.success(request, f"Invitation sent to {invitation.email}.")
            return redirect("project-settings", slug=project.slug)
    return render_settings(request, project, invite_form=form, status=400)


def _curated_invitation(request, slug: str, invitation_id: int) -> Invitation:
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    return get_object_or_404(Invitation, pk=invitation_id, project=project)


@require_POST
@never_cache
@login_required
def invitation_action(request, slug: str, invitation_id: int, action: str):
    """Resend or revoke one invitation of the project."""
    invitation = _curated_invitation(request, slug, invitation_id)
    service = {"resend": invitation_resend, "revoke": invitation_revoke}.get(action)
    if service is None:
        raise Http404("No such action")
    try:
        service(invitation=invitation, actor=request.user)
    except InvitationClosed as exc:
        messages.error(request, f"Not done: the invitation of {invitation.email} is {exc.state}.")
    else:
        done = "sent again" if action == "resend" else "revoked"
        messages.success(request, f"The invitation of {invitation.email} was {done}.")
    return redirect("project-settings", slug=slug)


class AcceptPasswordForm(SetPasswordForm):
    """Django's new-password form (the validators included), for an account not made yet."""

    def __init__(self, email: str, *args, **kwargs):
        super().__init__(User(username=email, email=email), *args, **kwargs)


@never_cache
@sensitive_post_parameters("new_password1", "new_password2")
@require_http_methods(["GET", "POST"])
def invitation_page(request, token: str):
    invitation = invitation_for_token(token)
    if invitation is None:
        return render(request, PAGE, {"state": "unknown"}, status=404)
    if invitation.state != "pending":
        return render(
            request, PAGE, {"state": invitation.state, "invitation": invitation}, status=410
        )
    accounts = invitation_accounts(invitation)
    if accounts:
        return _existing_account(request, invitation, accounts)
    context = {"state": "pending", "invitation": invitation, **_sso(request)}
    if not settings.ARBITER_LOCAL_PASSWORDS:
        # Single sign-on only: the sign-in makes the account, which then accepts here.
        status = 403 if request.method == "POST" else 200
        return render(request, PAGE, {**context, "form": None}, status=status)
    form = AcceptPasswordForm(invitation.email, request.POST or None)
    if form.is_valid():
        try:
            return _accepted(request, invitation, password=form.cleaned_data["new_password1"])
        except ValidationError as exc:
            form.add_error(None, exc.messages[0])
    return render(request, PAGE, {**context, "form": form}, status=400 if form.is_bound else 200)


def _sso(request) -> dict:
    """The "Sign in with ..." button, coming back to this page, for someone not signed in."""
    if request.user.is_authenticated:
        return {"sso": None}
    return {**sso_context(request), "sso_next": request.path}


def _existing_account(request, invitation: Invitation, accounts: list[User]):
    """The email has an account: its owner signs in (by password or single sign-on, with the
    second factor where the account has one), then accepts. Whoever else holds the link can
    neither accept for it nor give it a password."""
    signed_in = next((a for a in accounts if a.pk == request.user.pk), None)
    if request.method == "POST" and signed_in is not None:
        return _accepted(request, invitation, user=signed_in)
    context = {
        "state": "pending",
        "invitation": invitation,
        "has_account": True,
        "account": signed_in or (accounts[0] if len(accounts) == 1 else None),
        "signed_in": signed_in is not None,
        **_sso(request),
    }
    return render(request, PAGE, context, status=403 if request.method == "POST" else 200)


def _accepted(request, invitation: Invitation, *, password: str | None = None, user=None):
    """Accepts; a new account is signed in through allauth's login stages (as at the login
    page), an account accepting for itself is signed in already."""
    try:
        membership = invitation_accept(invitation=invitation, password=password, user=user)
    except InvitationClosed as exc:
        return render(request, PAGE, {"state": exc.state, "invitation": invitation}, status=410)
    messages.success(request, f"Welcome to {membership.project.name}.")
    target = reverse("project-detail", args=[membership.project.slug])
    if user is not None:
        return redirect(target)
    return perform_login(request, membership.user, redirect_url=target)
