"""Outgoing mail: a service queues a message (``mail_queue``) and a worker on the ``mail``
queue sends it over SMTP (``mail_deliver``; config/mail.py reads the server from
``ARBITER_EMAIL_URL``). A request never waits for the SMTP server, and a server that is down
for a while only delays the message: the task retries with backoff. Links in mail start with
``ARBITER_BASE_URL`` (``absolute_url``), the site's public address."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import EmailMessage

from annotation.core.jobs import job_publish

MAIL_SEND_TASK = "annotation.mail_send"


def absolute_url(path: str) -> str:
    """``path`` (from ``reverse``) on the site's public address."""
    return f"{settings.ARBITER_BASE_URL}{path}"


def mail_queue(*, to: str, subject: str, body: str) -> None:
    """Sends a plain-text message to ``to`` through the mail queue, once the current
    transaction commits (a rolled-back invitation sends nothing). Raises ``Unavailable`` when
    the broker cannot take it outside a transaction."""
    message = {"to": to, "subject": " ".join(subject.split()), "body": body}
    # The body holds a one-time link: Celery's logs show the task without it.
    shown = {"message": {"to": to, "subject": message["subject"]}}
    job_publish(
        MAIL_SEND_TASK,
        kwargs={"message": message},
        kwargsrepr=repr(shown),
        refusal="log_at_commit",
    )


def mail_deliver(*, message: dict[str, str]) -> None:
    """Sends one queued message with the configured backend, from ``DEFAULT_FROM_EMAIL``."""
    EmailMessage(
        subject=message["subject"],
        body=message["body"],
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[message["to"]],
    ).send()
