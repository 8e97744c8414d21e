"""The login page (docs/sso.md): Django's login form, unless local passwords are switched off,
and the "Sign in with ..." button when single sign-on is configured. A password that checks out
goes through allauth's login stages, so an account with two-factor login is asked for its code
before it is signed in."""

from __future__ import annotations

from allauth.account.utils import perform_login  # type: ignore[import-untyped]
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpResponseForbidden
from django.template.loader import render_to_string

from annotation.accounts.sso import sso_enabled, sso_login_url

PASSWORDS_OFF = "Passwords are switched off here: sign in with {name}."


def refuse_without_local_passwords(request):
    """A 403 answer for a password form posted while ``ARBITER_LOCAL_PASSWORDS`` is off, else
    None."""
    if settings.ARBITER_LOCAL_PASSWORDS:
        return None
    return HttpResponseForbidden(PASSWORDS_OFF.format(name=settings.ARBITER_OIDC_NAME))


def sso_context(request) -> dict:
    """What a page offering single sign-on needs: the button's URL and name."""
    if not sso_enabled():
        return {"sso": None}
    return {"sso": {"url": sso_login_url(), "name": settings.ARBITER_OIDC_NAME}}


class LoginView(auth_views.LoginView):
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        if not settings.ARBITER_LOCAL_PASSWORDS:
            message = PASSWORDS_OFF.format(name=settings.ARBITER_OIDC_NAME)
            page = render_to_string(
                "registration/login.html",
                {**self.get_context_data(), "refused": message},
                request=request,
            )
            return HttpResponseForbidden(page)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        return perform_login(self.request, form.get_user(), redirect_url=self.get_success_url())

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(sso_context(self.request))
        context["local_passwords"] = settings.ARBITER_LOCAL_PASSWORDS
        return context
