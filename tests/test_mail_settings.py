"""Mail settings from the environment (config/mail.py, docs/operations.md "Mail"): each scheme
of ARBITER_EMAIL_URL, percent-encoded credentials, the console backend when unset, and a clear
refusal for each bad value, and in production for mail without ARBITER_BASE_URL."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.mail import CONSOLE_BACKEND, SMTP_BACKEND
from config.mail import mail_settings as read_settings


def mail_settings(environ: dict[str, str], *, production: bool):
    """The settings the environment ``environ`` gives."""
    return read_settings(
        url=environ.get("ARBITER_EMAIL_URL", ""),
        sender=environ.get("ARBITER_EMAIL_FROM", ""),
        base_url=environ.get("ARBITER_BASE_URL", ""),
        production=production,
    )


def test_unset_mail_is_printed_by_the_console_backend():
    values = mail_settings({}, production=True)
    assert values.email == {"EMAIL_BACKEND": CONSOLE_BACKEND}
    assert values.base_url == "http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("url", "port", "tls", "ssl"),
    [
        ("smtp://mail.example.org", 25, False, False),
        ("smtp+tls://mail.example.org", 587, True, False),
        ("smtps://mail.example.org", 465, False, True),
        ("SMTP+TLS://mail.example.org:2525/", 2525, True, False),
    ],
)
def test_each_scheme(url, port, tls, ssl):
    email = mail_settings({"ARBITER_EMAIL_URL": url}, production=False).email
    assert email["EMAIL_BACKEND"] == SMTP_BACKEND
    assert (email["EMAIL_HOST"], email["EMAIL_PORT"]) == ("mail.example.org", port)
    assert (email["EMAIL_USE_TLS"], email["EMAIL_USE_SSL"]) == (tls, ssl)


def test_credentials_are_percent_decoded():
    environ = {
        "ARBITER_EMAIL_URL": "smtps://apikey%40example.org:p%40ss%3Aw%2Frd@smtp.example.org",
        "ARBITER_EMAIL_FROM": "Arbiter <noreply@example.org>",
        "ARBITER_BASE_URL": "https://arbiter.example.org/",
    }
    values = mail_settings(environ, production=True)
    assert values.email["EMAIL_HOST_USER"] == "apikey@example.org"
    assert values.email["EMAIL_HOST_PASSWORD"] == "p@ss:w/rd"
    assert values.sender == "Arbiter <noreply@example.org>"
    assert values.base_url == "https://arbiter.example.org"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"ARBITER_EMAIL_URL": "http://mail.example.org"}, "unknown scheme 'http'"),
        ({"ARBITER_EMAIL_URL": "smtp://"}, "names no host"),
        ({"ARBITER_EMAIL_URL": "smtp://mail.example.org:99999"}, "the port is not a number"),
        ({"ARBITER_EMAIL_URL": "smtp://mail.example.org/x?y=1"}, "no path, query or fragment"),
        ({"ARBITER_BASE_URL": "arbiter.example.org"}, "ARBITER_BASE_URL='arbiter.example.org'"),
    ],
)
def test_bad_values_are_refused_by_name(environ, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        mail_settings(environ, production=False)


def test_production_refuses_mail_without_the_sites_address():
    environ = {"ARBITER_EMAIL_URL": "smtp+tls://mail.example.org"}
    with pytest.raises(ImproperlyConfigured, match="ARBITER_BASE_URL is not"):
        mail_settings(environ, production=True)
    assert mail_settings(environ, production=False).email["EMAIL_HOST"] == "mail.example.org"
