"""Single sign-on in Chromium against a real OpenID provider (tests/oidc_server.py): "Sign in
with ..." on the login page, the provider's own login form, back signed in with the role a
groups claim gives; that role requires two-factor login, which is set up with a code computed
by pyotp, and asked for at the next sign-in."""

from __future__ import annotations

import pyotp
import pytest
from django.core.cache import cache

from config.sso import group_roles
from tests.browser.conftest import page_errors
from tests.totp_codes import current_code

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _codes_forgotten():
    """allauth counts failed codes and remembers used ones in the cache, by user id: another
    test's never count here."""
    cache.clear()


def _sign_in_at_provider(page, live_server, login: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.click("text=Sign in with Example ID")
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    page.click("button[type=submit]")


def test_sign_in_with_the_provider_then_set_up_two_factor_login(
    browser, page, live_server, sso_settings, settings, project, screenshot
):
    settings.ARBITER_OIDC_GROUPS_CLAIM = "groups"
    settings.ARBITER_OIDC_GROUP_ROLES = group_roles(f"leads={project.slug}:curator")
    settings.ARBITER_MFA_REQUIRED_FOR = ("curators",)
    sso_settings.account(
        "lead-sub",
        email="lead@example.org",
        email_verified=True,
        preferred_username="lead",
        groups=["leads"],
    )
    _sign_in_at_provider(page, live_server, "lead-sub")
    # Signed in, a curator by the groups claim, so sent to set up two-factor login first.
    page.wait_for_url(f"{live_server.url}/accounts/2fa/totp/activate/")
    # From here on Arbiter's pages only (the provider's test page asks for a web font).
    errors = page_errors(page)
    page.reload()
    assert "Your role requires two-factor login" in page.inner_text("body")
    screenshot(page, "sso-totp-setup")
    totp = pyotp.TOTP(page.inner_text("#totp-secret"))
    page.fill("#id_code", current_code(totp))
    page.click("text=Turn on")
    page.wait_for_selector("#mfa-state")
    assert page.inner_text("#mfa-state").startswith("On")
    page.goto(f"{live_server.url}/p/{project.slug}/")
    assert "Demo project" in page.inner_text("h1")
    assert errors == []

    again = browser.new_context().new_page()
    _sign_in_at_provider(again, live_server, "lead-sub")
    again.wait_for_url(f"{live_server.url}/accounts/2fa/authenticate/")
    again.fill("#id_code", current_code(totp))
    again.click("text=Sign in")
    again.wait_for_url(f"{live_server.url}/")
    again.goto(f"{live_server.url}/account/")
    assert "Signed in as lead" in again.inner_text("body")
