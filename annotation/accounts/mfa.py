"""Two-factor login (docs/sso.md, "Two-factor login"): allauth's TOTP, which anyone may turn on
from the account page and ``ARBITER_MFA_REQUIRED_FOR`` requires of curators and operators.
Until such a user has set it up, every page sends them to its set-up page and the API refuses
their session requests, as for a one-time password (annotation.accounts.password_change). The
requirement is checked on every request, so a role given mid-session (or a session from before
the setting) counts at once: one query (the role) per request while the setting is on, none
once the session's user is known to have an authenticator."""

from __future__ import annotations

from allauth.mfa.models import Authenticator  # type: ignore[import-untyped]
from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from annotation.audit.services import audit_record
from annotation.core.access import is_operator
from annotation.models import Membership, Role

API_PATH_PREFIX = "/api/"
# Set at login while the user must still set up a second factor: one query per login, and
# one per request only while it is set.
SESSION_KEY = "arbiter_mfa_setup_required"
# Set once the session's user has an authenticator: nothing more to check in this session.
SESSION_OK_KEY = "arbiter_mfa_set_up"
OPEN_VIEWS = frozenset({"logout", "login", "healthz", "favicon", "mfa_activate_totp", "mfa_index"})
MESSAGE = "Set up two-factor login first: your role requires it."


def mfa_enabled(user) -> bool:
    return Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()


def mfa_required(user) -> bool:
    """Whether ``ARBITER_MFA_REQUIRED_FOR`` asks ``user`` for a second factor."""
    required = settings.ARBITER_MFA_REQUIRED_FOR
    if "operators" in required and is_operator(user):
        return True
    return (
        "curators" in required and Membership.objects.filter(user=user, role=Role.CURATOR).exists()
    )


def remember_at_login(sender, request, user, **kwargs) -> None:
    """``user_logged_in`` receiver: marks the session of a user who must still set it up."""
    if request is not None and mfa_required(user) and not mfa_enabled(user):
        request.session[SESSION_KEY] = True


def two_factor_audit(*, actor, authenticator: Authenticator, on: bool) -> None:
    """Two-factor login turned on or off for ``authenticator``'s user, in the site-wide audit
    log as ``sign_in.settings_changed`` by ``actor`` (the user, or an operator in the admin)."""
    if authenticator.type != Authenticator.Type.TOTP:  # recovery codes come and go with it
        return
    user = authenticator.user
    audit_record(
        actor=actor,
        project=None,
        action="sign_in.settings_changed",
        target=user,
        target_type="user",
        target_label=user.get_username(),
        before={"two_factor_login": not on},
        after={"two_factor_login": on},
    )


def audit_authenticator_added(sender, request, user, authenticator, **kwargs) -> None:
    """allauth's ``authenticator_added`` receiver: two-factor login turned on, as the user's own
    change (allauth sends it once the change is committed)."""
    two_factor_audit(actor=user, authenticator=authenticator, on=True)


def audit_authenticator_removed(sender, request, user, authenticator, **kwargs) -> None:
    """allauth's ``authenticator_removed`` receiver: two-factor login turned off."""
    two_factor_audit(actor=user, authenticator=authenticator, on=False)


def mfa_setup_pending(request) -> bool:
    """Whether the signed-in user must still set up two-factor login (cached in the session
    once they have an authenticator)."""
    user = request.user
    if request.session.get(SESSION_OK_KEY) == user.pk:
        return False
    if not request.session.get(SESSION_KEY) and not mfa_required(user):
        return False
    if mfa_enabled(user):
        request.session.pop(SESSION_KEY, None)
        request.session[SESSION_OK_KEY] = user.pk
        return False
    return True


class MfaRequiredMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        if not request.user.is_authenticated:
            return None
        if request.resolver_match.url_name in OPEN_VIEWS:
            return None
        if not mfa_setup_pending(request):
            return None
        if request.path_info.startswith(API_PATH_PREFIX):
            return JsonResponse({"detail": MESSAGE}, status=403)
        if getattr(request, "htmx", False):
            return HttpResponseClientRedirect(reverse("mfa_activate_totp"))
        return redirect("mfa_activate_totp")
