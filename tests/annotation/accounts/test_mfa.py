"""Two-factor login (docs/sso.md, "Two-factor login"): TOTP set up from the account page,
asked for at the login page, and required of curators by ``ARBITER_MFA_REQUIRED_FOR``. Codes
are computed with pyotp, apart from allauth's own code."""

from __future__ import annotations

import re

import pyotp
import pytest
from allauth.mfa.models import Authenticator
from django.core.cache import cache
from django.test import Client

from tests.conftest import PASSWORD

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
    response = client.post("/accounts/2fa/totp/activate/", {"code": totp.now()})
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
    fresh.post("/accounts/2fa/authenticate/", {"code": totp.now()})
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
