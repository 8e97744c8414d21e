"""Two-factor login (docs/sso.md, "Two-factor login"): TOTP set up from the account page,
asked for at the login page, and required of curators by ``ARBITER_MFA_REQUIRED_FOR``. Codes
are computed with pyotp, apart from allauth's own code."""

from __future__ import annotations

import re

import pyotp
import pytest
from allauth.mfa.models import Authenticator
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from annotation.accounts.services import api_token_create
from annotation.models import ApiToken, Membership, Role
from annotation.projects.services import member_role_change
from tests.conftest import PASSWORD
from tests.totp_codes import current_code

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _codes_forgotten():
    """allauth counts failed codes and remembers used ones in the cache, by user id: another
    test's never count here."""
    cache.clear()


def _enrol(client) -> pyotp.TOTP:
    page = client.get("/accounts/2fa/totp/activate/").text
    (secret,) = re.findall(r'id="totp-secret">([A-Z2-7]+)<', page)
    totp = pyotp.TOTP(secret)
    wrong = client.post("/accounts/2fa/totp/activate/", {"code": "000000"})
    assert wrong.status_code == 200
    assert "Incorrect code" in wrong.text
    response = client.post("/accounts/2fa/totp/activate/", {"code": current_code(totp)})
    assert response.status_code == 302
    return totp


def test_required_for_curators_until_set_up_then_asked_at_login(client, settings, carol, alice):
    settings.ARBITER_MFA_REQUIRED_FOR = ("curators",)
    assert client.post("/login/", {"username": "carol", "password": PASSWORD}).status_code == 302
    # Every page sends the curator to set it up; the API refuses their session.
    assert client.get("/")["Location"] == "/accounts/2fa/totp/activate/"
    assert client.get("/api/v1/projects/").status_code == 403
    totp = _enrol(client)
    assert client.get("/").status_code == 200
    assert Authenticator.objects.filter(user=carol, type="totp").exists()
    # Required: carol cannot turn it off.
    client.post("/accounts/2fa/totp/deactivate/", {})
    assert Authenticator.objects.filter(user=carol).exists()

    fresh = Client()
    response = fresh.post("/login/", {"username": "carol", "password": PASSWORD, "next": "/"})
    assert response["Location"] == "/accounts/2fa/authenticate/"
    assert "_auth_user_id" not in fresh.session
    wrong = fresh.post("/accounts/2fa/authenticate/", {"code": "000000"})
    assert "Incorrect code" in wrong.text
    assert "_auth_user_id" not in fresh.session
    fresh.post("/accounts/2fa/authenticate/", {"code": current_code(totp)})
    assert int(fresh.session["_auth_user_id"]) == carol.pk

    # An annotator is not asked: alice goes straight in.
    other = Client()
    other.post("/login/", {"username": "alice", "password": PASSWORD})
    assert other.get("/").status_code == 200


def test_admin_login_refuses_an_account_with_two_factor_login(client, settings, carol):
    carol.is_superuser = carol.is_staff = True
    carol.save(update_fields=["is_superuser", "is_staff"])
    client.force_login(carol)
    _enrol(client)
    client.logout()
    response = client.post(
        "/admin/login/", {"username": "carol", "password": PASSWORD, "next": "/admin/"}
    )
    assert "Sign in on the site&#x27;s login page" in response.text
    assert "_auth_user_id" not in client.session


def test_two_factor_pages_need_a_signed_in_user_and_csrf(client, alice):
    for path in ("/accounts/2fa/", "/accounts/2fa/totp/activate/"):
        assert client.get(path)["Location"].startswith("/login/")
    guarded = Client(enforce_csrf_checks=True)
    guarded.force_login(alice)
    assert guarded.post("/accounts/2fa/totp/activate/", {"code": "123456"}).status_code == 403
    assert not Authenticator.objects.exists()


def test_a_role_given_mid_session_requires_it_at_the_next_request(client, settings, alice):
    # Signed in before the setting and before the role: both count at once.
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    settings.ARBITER_MFA_REQUIRED_FOR = ("curators",)
    assert client.get("/").status_code == 200
    membership = Membership.objects.get(user=alice)
    member_role_change(membership=membership, role=Role.CURATOR)
    assert client.get("/")["Location"] == "/accounts/2fa/totp/activate/"
    assert client.get("/api/v1/projects/").status_code == 403
    assert client.post(reverse("account-token-new"), {"name": "script"}).status_code == 302
    assert not ApiToken.objects.exists()
    with pytest.raises(ValidationError, match="Set up two-factor login first"):
        api_token_create(user=alice, name="script")
    _enrol(client)
    assert client.get("/").status_code == 200


def test_a_token_needs_a_current_code_with_two_factor_login_on(client, alice):
    client.force_login(alice)
    url = reverse("account-token-new")
    # Without two-factor login no code is asked for.
    assert client.post(url, {"name": "before"}).status_code == 200
    totp = _enrol(client)
    page = client.get("/account/").text
    assert 'name="code"' in page
    missing = client.post(url, {"name": "script"})
    assert missing.status_code == 400
    wrong = client.post(url, {"name": "script", "code": "000000"})
    assert "Incorrect code" in wrong.text
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["before"]
    made = client.post(url, {"name": "script", "code": current_code(totp)})
    assert made.status_code == 200
    assert ApiToken.objects.filter(user=alice, name="script").exists()
