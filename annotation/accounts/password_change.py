"""The one-time password's first login: until it is changed, every page redirects to the
account page, and the API refuses session requests with 403. Requests with an API token go on:
a token is issued by an operator, not derived from the password (docs/curators.md, "Accounts").
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from annotation.accounts.services import password_change_required

API_PATH_PREFIX = "/api/"
# Set at login while the user must still change a one-time password, so the check costs one
# query per login, not one per request. A password changed elsewhere ends the session anyway
# (Django ties sessions to the password's hash).
SESSION_KEY = "arbiter_password_change_required"
# The pages a user with a one-time password may still reach: where they change it, and out.
OPEN_VIEWS = frozenset(
    {
        "account",
        "login",
        "logout",
        "healthz",
        "favicon",
        "password_reset",
        "password_reset_done",
        "password_reset_confirm",
        "password_reset_complete",
    }
)
MESSAGE = "Change your one-time password on the account page first."


def remember_at_login(sender, request, user, **kwargs) -> None:
    """``user_logged_in`` receiver: marks the new session of a user with a one-time password."""
    if request is not None and password_change_required(user=user):
        request.session[SESSION_KEY] = True


def password_change_done(request) -> None:
    """The session's user has chosen their own password: no more redirects."""
    request.session.pop(SESSION_KEY, None)


class PasswordChangeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        # Without a session cookie (an API token, a visitor) the session is not even looked at.
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            return None
        if not request.session.get(SESSION_KEY) or not request.user.is_authenticated:
            return None
        if request.resolver_match.url_name in OPEN_VIEWS:
            return None
        if request.path_info.startswith(API_PATH_PREFIX):
            return JsonResponse({"detail": MESSAGE}, status=403)
        target = f"{reverse('account')}?{urlencode({'next': request.get_full_path()})}"
        if getattr(request, "htmx", False):
            return HttpResponseClientRedirect(target)
        return redirect(target)
