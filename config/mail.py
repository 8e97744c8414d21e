"""Outgoing mail from the environment (docs/operations.md, "Mail"): ``ARBITER_EMAIL_URL`` names
the SMTP server (``smtp://`` plain, ``smtp+tls://`` STARTTLS, ``smtps://`` implicit TLS; user
and password in the URL, percent-encoded), ``ARBITER_EMAIL_FROM`` the sender and
``ARBITER_BASE_URL`` the site's public address, which links in mail start with (a command or a
worker has no request to take it from). Unset, mail is printed by the console backend."""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
CONSOLE_BACKEND = "django.core.mail.backends.console.EmailBackend"
# scheme: (default port, STARTTLS, implicit TLS)
SCHEMES: dict[str, tuple[int, bool, bool]] = {
    "smtp": (25, False, False),
    "smtp+tls": (587, True, False),
    "smtps": (465, False, True),
}
DEFAULT_FROM = "Arbiter <arbiter@localhost>"
DEFAULT_TIMEOUT_S = 30
# Where `make demo` serves the site, for links in mail when ARBITER_BASE_URL is unset.
DEVELOPMENT_BASE_URL = "http://127.0.0.1:8000"


def smtp_settings(url: str) -> dict[str, Any]:
    """Django's ``EMAIL_*`` settings for the SMTP server ``url`` names."""
    name = "ARBITER_EMAIL_URL"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ImproperlyConfigured(
            f"{name}: unknown scheme {parts.scheme!r}; use smtp://, smtp+tls:// or smtps://"
        )
    if not parts.hostname:
        raise ImproperlyConfigured(f"{name} names no host (smtp://user:password@host:port)")
    try:
        port = parts.port
    except ValueError:
        raise ImproperlyConfigured(f"{name}: the port is not a number from 1 to 65535") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ImproperlyConfigured(f"{name}: no path, query or fragment after host:port")
    default_port, use_tls, use_ssl = SCHEMES[scheme]
    return {
        "EMAIL_BACKEND": SMTP_BACKEND,
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": port or default_port,
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_TLS": use_tls,
        "EMAIL_USE_SSL": use_ssl,
        "EMAIL_TIMEOUT": DEFAULT_TIMEOUT_S,
    }


def base_url_checked(url: str) -> str:
    """``ARBITER_BASE_URL`` without its trailing slash: an http(s) address and nothing more."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(
            f"ARBITER_BASE_URL={url!r}: give the site's public address, https://arbiter.example.org"
        )
    if parts.query or parts.fragment:
        raise ImproperlyConfigured(f"ARBITER_BASE_URL={url!r}: no query or fragment")
    return url.rstrip("/")


class MailSettings(NamedTuple):
    email: dict[str, Any]  # Django's EMAIL_* settings
    sender: str  # DEFAULT_FROM_EMAIL
    base_url: str  # ARBITER_BASE_URL


def mail_settings(*, url: str, sender: str, base_url: str, production: bool) -> MailSettings:
    """Every mail setting from the values of ``ARBITER_EMAIL_URL``, ``ARBITER_EMAIL_FROM`` and
    ``ARBITER_BASE_URL`` (empty when unset). In production a configured mail server without
    ``ARBITER_BASE_URL`` is refused: its links would point nowhere."""
    url, base_url = url.strip(), base_url.strip()
    if production and url and not base_url:
        raise ImproperlyConfigured(
            "ARBITER_EMAIL_URL is set but ARBITER_BASE_URL is not: links in mail need the "
            "site's public address"
        )
    return MailSettings(
        email=smtp_settings(url) if url else {"EMAIL_BACKEND": CONSOLE_BACKEND},
        sender=sender.strip() or DEFAULT_FROM,
        base_url=base_url_checked(base_url) if base_url else DEVELOPMENT_BASE_URL,
    )
