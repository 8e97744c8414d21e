"""API tokens on the account page (docs/api.md, "Authentication"): a named token is made
with its key shown once, listed, and revoked (CSRF checked); a revoked or expired token gets
401 from the API, command-line tokens included; nobody revokes another user's token."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import ApiToken

pytestmark = pytest.mark.django_db

ACCOUNT = reverse("account")
NEW = reverse("account-token-new")
PROJECTS = "/api/v1/projects/"


def api_with(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def made_key(client, name: str = "nightly import") -> str:
    page = client.post(NEW, {"name": name})
    assert page.status_code == 200
    found = re.search(r'<code class="new-token">(arb_[^<]+)</code>', page.content.decode())
    assert found, page.content.decode()
    return found.group(1)


def test_a_token_made_on_the_account_page_is_shown_once_and_works(client_for, alice, project):
    client = client_for(alice)
    key = made_key(client)
    token = ApiToken.objects.get(user=alice)
    assert token.name == "nightly import"
    assert key not in token.key_digest  # only its digest is kept
    assert token.expires_at is None
    listed = client.get(ACCOUNT).content.decode()
    assert "nightly import" in listed
    assert key not in listed  # never shown again
    assert token.key_start in listed
    assert api_with(key).get(PROJECTS).json()[0]["slug"] == project.slug


def test_a_vote_sent_with_a_named_token(client_for, alice, project, queued_pairs):
    api = api_with(made_key(client_for(alice)))
    claimed = api.post(f"/api/v1/projects/{project.slug}/claim/").json()
    voted = api.post(
        f"/api/v1/assignments/{claimed['id']}/vote/",
        {"choice": "left", "next": True},
        format="json",
    )
    assert voted.status_code == 201, voted.content
    assert voted.json()["next"]["id"] != claimed["id"]


def test_a_revoked_token_gets_401(client_for, alice):
    client = client_for(alice)
    key = made_key(client)
    token = ApiToken.objects.get(user=alice)
    response = client.post(reverse("account-token-revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    refused = api_with(key).get(PROJECTS)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "Token has been revoked."
    assert "revoked" in client.get(ACCOUNT).content.decode()


def test_tokens_expire_after_the_configured_days(client_for, alice, settings):
    settings.ARBITER_API_TOKEN_DAYS = 30
    key = made_key(client_for(alice))
    token = ApiToken.objects.get(user=alice)
    assert token.expires_at is not None
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    assert api_with(key).get(PROJECTS).status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(created_at=timezone.now() - timedelta(days=31))
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(days=1))
    refused = api_with(key).get(PROJECTS)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "Token has expired."


def test_a_command_line_token_expires_and_is_revoked_from_the_account_page(
    client_for, alice, settings, project, queued_pairs
):
    settings.ARBITER_API_TOKEN_DAYS = 7
    token = Token.objects.create(user=alice)
    assert api_with(token.key).get(PROJECTS).status_code == 200
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=8))
    for response in (
        api_with(token.key).get(PROJECTS),
        api_with(token.key).post(
            f"/api/v1/assignments/{1}/vote/", {"choice": "left"}, format="json"
        ),
    ):
        assert response.status_code == 401
        assert response.json()["detail"] == "Token has expired."
    client = client_for(alice)
    assert "expired" in client.get(ACCOUNT).content.decode()
    assert client.post(reverse("account-command-line-token-revoke")).status_code == 302
    assert not Token.objects.filter(user=alice).exists()


def test_nobody_revokes_another_users_token(client_for, alice, eve):
    key = made_key(client_for(alice))
    token = ApiToken.objects.get(user=alice)
    outsider = Client()
    outsider.force_login(eve)
    assert outsider.post(reverse("account-token-revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert api_with(key).get(PROJECTS).status_code == 200


def test_revoking_needs_the_csrf_token_and_a_post(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    token, _ = ApiToken.objects.get_or_create(
        user=alice, name="t", key_digest="0" * 64, key_start="arb_x"
    )
    assert browser.post(reverse("account-token-revoke", args=[token.pk])).status_code == 403
    assert browser.get(reverse("account-token-revoke", args=[token.pk])).status_code == 405
    assert browser.post(NEW, {"name": "x"}).status_code == 403
    token.refresh_from_db()
    assert token.revoked_at is None


@pytest.mark.parametrize(
    ("name", "message"), [("   ", "This field is required"), ("x" * 101, "at most 100")]
)
def test_a_bad_name_is_refused_with_a_message(client_for, alice, name, message):
    page = client_for(alice).post(NEW, {"name": name})
    assert page.status_code == 400
    assert message.lower() in page.content.decode().lower()
    assert not ApiToken.objects.filter(user=alice).exists()


def test_signed_out_visitors_are_sent_to_log_in(client):
    assert client.post(NEW, {"name": "x"}).status_code == 302
