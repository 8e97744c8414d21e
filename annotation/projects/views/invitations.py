"""Invitations: a project's curators invite, resend and revoke on the Settings page; the
invited person opens the mailed link, chooses a password (or signs in to the account that
already has the email) and lands in the project."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from annotation.accounts.login import sso_context
from annotation.core.access import CURATORS, get_project_for_user
from annotation.models import Invitation
from annotation.projects.invitations import (
    InvitationClosed,
    invitation_accept,
    invitation_account,
    invitation_create,
    invitation_for_token,
    invitation_resend,
    invitation_revoke,
)
from annotation.projects.views.settings import InviteForm, add_errors, render_settings

PAGE = "annotation/invitation.html"
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


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
    account = invitation_account(invitation)
    if account is not None and (
        account.has_usable_password() or _signed_in_as(request, account, invitation)
    ):
        return _existing_account(request, invitation, account)
    context = {"state": "pending", "invitation": invitation, **_sso(request)}
    if not settings.ARBITER_LOCAL_PASSWORDS:
        # Single sign-on only: the sign-in makes the account, which then accepts here.
        status = 403 if request.method == "POST" else 200
        return render(request, PAGE, {**context, "form": None}, status=status)
    form = AcceptPasswordForm(invitation.email, request.POST or None)
    if form.is_valid():
        return _accepted(request, invitation, password=form.cleaned_data["new_password1"])
    return render(request, PAGE, {**context, "form": form}, status=400 if form.is_bound else 200)


def _signed_in_as(request, account: User, invitation: Invitation) -> bool:
    """The signed-in user is ``account`` and has the invited email (an account made by single
    sign-on has an email only when the provider marked it verified)."""
    return (
        request.user.is_authenticated
        and request.user.pk == account.pk
        and account.email.lower() == invitation.email.lower()
    )


def _sso(request) -> dict:
    """The "Sign in with ..." button, coming back to this page, for someone not signed in."""
    if request.user.is_authenticated:
        return {"sso": None}
    return {**sso_context(request), "sso_next": request.path}


def _existing_account(request, invitation: Invitation, account: User):
    """The email has an account with a password: its owner signs in, then accepts."""
    if request.method == "POST" and request.user.pk == account.pk:
        return _accepted(request, invitation, user=account)
    context = {"state": "pending", "invitation": invitation, "account": account, **_sso(request)}
    return render(request, PAGE, context)


def _accepted(request, invitation: Invitation, *, password: str | None = None, user=None):
    try:
        membership = invitation_accept(invitation=invitation, password=password, user=user)
    except InvitationClosed as exc:
        return render(request, PAGE, {"state": exc.state, "invitation": invitation}, status=410)
    login(request, membership.user, backend=MODEL_BACKEND)
    messages.success(request, f"Welcome to {membership.project.name}.")
    return redirect("project-detail", slug=membership.project.slug)
