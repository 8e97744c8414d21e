"""Password reset by email against a real SMTP server (tests/smtp_server.py): the login page
links to it, the mail arrives with a link on ARBITER_BASE_URL, the link sets a new password
once; an unknown address gets the same answer and no mail; requests are limited per hour."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from annotation.models import OneTimePassword
from tests.conftest import PASSWORD
from tests.factories import UserFactory

BASE_URL = "https://arbiter.example.org"
NEW_PASSWORD = "another long passphrase"
RESET = reverse("password_reset")

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _mail(settings, smtp_server):
    smtp_server.use(settings)
    settings.ARBITER_BASE_URL = BASE_URL
    cache.clear()


def signs_in(username: str, password: str) -> bool:
    response = Client().post(reverse("login"), {"username": username, "password": password})
    return response.status_code == 302


def ask(email: str, capture, client=None):
    with capture(execute=True):
        return (client or Client()).post(RESET, {"email": email})


def test_the_reset_mail_arrives_and_its_link_sets_a_new_password_once(
    smtp_server, django_capture_on_commit_callbacks
):
    user = get_user_model().objects.create_user("frank", "frank@example.org", PASSWORD)
    OneTimePassword.objects.create(user=user, password=user.password)
    assert 'href="/password-reset/"' in Client().get(reverse("login")).content.decode()

    response = ask("FRANK@example.org", django_capture_on_commit_callbacks)
    assert response.status_code == 302
    assert response["Location"] == reverse("password_reset_done")
    message = smtp_server.wait_for("frank@example.org")
    assert message["Subject"] == "Reset your Arbiter password"
    (link,) = re.findall(re.escape(BASE_URL) + r"(/\S+)", message.get_content())

    visitor = Client()
    form_page = visitor.get(link, follow=True)  # Django moves the token into the session
    assert "Choose a new password" in form_page.content.decode()
    set_url = form_page.redirect_chain[-1][0]
    done = visitor.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302
    assert done["Location"] == reverse("password_reset_complete")
    assert signs_in("frank", NEW_PASSWORD)
    assert not signs_in("frank", PASSWORD)

    again = Client().get(link, follow=True)
    assert "Link not valid" in again.content.decode()
    user.refresh_from_db()
    assert user.check_password(NEW_PASSWORD)


def test_an_unknown_address_gets_the_same_answer_and_no_mail(
    smtp_server, django_capture_on_commit_callbacks
):
    UserFactory(username="grace", email="grace@example.org")
    known = ask("grace@example.org", django_capture_on_commit_callbacks)
    unknown = ask("nobody@example.org", django_capture_on_commit_callbacks)
    assert (unknown.status_code, unknown["Location"]) == (known.status_code, known["Location"])
    smtp_server.wait_for("grace@example.org")
    assert smtp_server.to("nobody@example.org") == []


def test_requests_past_the_hourly_limit_are_refused(
    settings, smtp_server, django_capture_on_commit_callbacks
):
    settings.ARBITER_PASSWORD_RESETS_PER_HOUR = 2
    UserFactory(username="heidi", email="heidi@example.org")
    answers = [
        ask("heidi@example.org", django_capture_on_commit_callbacks).status_code for _ in range(3)
    ]
    assert answers == [302, 302, 429]
    refused = ask("other@example.org", django_capture_on_commit_callbacks)  # same client address
    assert refused.status_code == 429
    assert "Too many password resets" in refused.content.decode()
    smtp_server.wait_for("heidi@example.org", count=2)
    assert len(smtp_server.to("heidi@example.org")) == 2


def test_the_reset_form_needs_csrf_and_names_a_bad_address():
    guarded = Client(enforce_csrf_checks=True)
    assert guarded.post(RESET, {"email": "x@example.org"}).status_code == 403
    bad = Client().post(RESET, {"email": "not an address"})
    assert bad.status_code == 200
    assert "Enter a valid email address." in bad.content.decode()
