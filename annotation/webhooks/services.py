"""A project's webhooks, as curators manage them (docs/webhooks.md): endpoints made, changed,
removed; their secret rotated (shown once, each time); a delivery sent again (Redeliver, the
same event and id); a test event sent to one endpoint. Each keeps ``Project.webhooks_active``
true exactly while the project has an active endpoint, so that a project without one writes
no event."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotation.audit.actions import SECRET_CHANGED
from annotation.audit.services import audit_changes, audit_record, audit_url
from annotation.core.errors import InvalidInput
from annotation.core.jobs import job_publish
from annotation.core.webhook_events import DELIVER_TASK, webhook_event_create
from annotation.models import (
    SUBSCRIBABLE_EVENTS,
    Project,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEventKind,
)
from annotation.webhooks.transport import TargetRefused, target_check

MAX_URL_CHARS = 500
MAX_DESCRIPTION_CHARS = 200
_SECRET_BYTES = 24


def secret_new() -> str:
    """A fresh signing secret in the Standard Webhooks form: ``whsec_`` and base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")


def check_url(url: str) -> str:
    """The URL, stripped, if it may be sent to now; raises ``InvalidInput`` naming ``url``.
    Every attempt checks it again, on the address it then connects to."""
    url = (url or "").strip()
    if not url:
        raise InvalidInput("url: give the address that receives the events.")
    if len(url) > MAX_URL_CHARS:
        raise InvalidInput(f"url: at most {MAX_URL_CHARS} characters.")
    try:
        target_check(url)
    except TargetRefused as exc:
        raise InvalidInput(f"url: {exc}.") from None
    return url


def check_events(events: Iterable[str]) -> list[str]:
    """The event kinds, known and in their documented order; raises ``InvalidInput``."""
    chosen = list(events)
    unknown = [kind for kind in chosen if kind not in SUBSCRIBABLE_EVENTS]
    if unknown:
        known = ", ".join(SUBSCRIBABLE_EVENTS)
        raise InvalidInput(f"events: unknown kind {unknown[0]!r} (known: {known}).")
    if not chosen:
        raise InvalidInput("events: choose at least one event.")
    return [kind for kind in SUBSCRIBABLE_EVENTS if kind in chosen]


def check_description(description: str) -> str:
    description = (description or "").strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidInput(f"description: at most {MAX_DESCRIPTION_CHARS} characters.")
    return description


def _flag_sync(project: Project) -> None:
    """Sets ``webhooks_active`` on the row, and on the caller's instance of it."""
    active = WebhookEndpoint.objects.filter(project_id=OuterRef("pk"), active=True)
    Project.objects.filter(pk=project.pk).update(webhooks_active=Exists(active))
    project.webhooks_active = WebhookEndpoint.objects.filter(project=project, active=True).exists()


# An endpoint's settings, as the audit log records them.
_AUDITED_FIELDS = ("url", "events", "description", "active")


@transaction.atomic
def webhook_create(
    *,
    project: Project,
    url: str,
    events: Iterable[str],
    description: str = "",
    active: bool = True,
    actor=None,
) -> WebhookEndpoint:
    """A new endpoint with a fresh secret (its caller shows it once)."""
    endpoint = WebhookEndpoint.objects.create(
        project=project,
        url=check_url(url),
        events=check_events(events),
        description=check_description(description),
        secret=secret_new(),
        active=active,
    )
    _flag_sync(project)
    after = {**_audited(endpoint), "secret": SECRET_CHANGED}
    _audit(actor, endpoint, "webhook.created", {}, after)
    return endpoint


def _audited(endpoint: WebhookEndpoint) -> dict:
    """What the audit log keeps of an endpoint: its settings, never its secret, its URL
    without the credentials or query string a receiver's token may travel in."""
    kept = {field: getattr(endpoint, field) for field in _AUDITED_FIELDS}
    return {**kept, "url": audit_url(endpoint.url)}


def _audit(actor, endpoint: WebhookEndpoint, action: str, before: dict, after: dict) -> None:
    audit_record(
        actor=actor,
        project=endpoint.project,
        action=action,
        target=endpoint,
        target_label=audit_url(endpoint.url),
        before=before,
        after=after,
    )


@transaction.atomic
def webhook_update(
    *,
    endpoint: WebhookEndpoint,
    url: str | None = None,
    events: Iterable[str] | None = None,
    description: str | None = None,
    active: bool | None = None,
    actor=None,
) -> WebhookEndpoint:
    """Changes the fields given (None: kept). Events already written keep their deliveries."""
    old, old_url = _audited(endpoint), endpoint.url
    if url is not None:
        endpoint.url = check_url(url)
    if events is not None:
        endpoint.events = check_events(events)
    if description is not None:
        endpoint.description = check_description(description)
    if active is not None:
        endpoint.active = active
    endpoint.save(update_fields=list(_AUDITED_FIELDS))
    _flag_sync(endpoint.project)
    before, after = audit_changes(old, _audited(endpoint))
    if endpoint.url != old_url and "url" not in after:
        # Only what the log leaves out changed: it says so, never what it was.
        before["url"] = old["url"]
        after["url"] = f"{old['url']} (query or credentials {SECRET_CHANGED})"
    if after:
        _audit(actor, endpoint, "webhook.changed", before, after)
    return endpoint


@transaction.atomic
def webhook_delete(*, endpoint: WebhookEndpoint, actor=None) -> None:
    """Removes the endpoint, its deliveries and their log."""
    project = endpoint.project
    _audit(actor, endpoint, "webhook.removed", _audited(endpoint), {})
    endpoint.delete()
    _flag_sync(project)


@transaction.atomic
def webhook_secret_rotate(*, endpoint: WebhookEndpoint, actor=None) -> str:
    """A new secret for the endpoint, returned to be shown once; the old one stops signing
    at once, retries of earlier events included. The audit log records that it changed."""
    endpoint.secret = secret_new()
    endpoint.save(update_fields=["secret"])
    _audit(actor, endpoint, "webhook.secret_rotated", {}, {"secret": SECRET_CHANGED})
    return endpoint.secret


def webhook_redeliver(*, delivery: WebhookDelivery) -> None:
    """Sends a delivery again (delivered, failed or waiting): the same event, the same
    ``webhook-id``, now, with a fresh retry window."""
    now = timezone.now()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=WebhookDelivery.Status.PENDING,
        next_attempt_at=now,
        retried_at=now,
        finished_at=None,
    )
    job_publish(DELIVER_TASK, refusal="log")


@transaction.atomic
def webhook_test(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """A ``webhook.test`` event sent to this endpoint only (active or not), at once."""
    data = {"project": endpoint.project.slug, "endpoint": endpoint.pk}
    event = webhook_event_create(
        project_id=endpoint.project_id, kind=WebhookEventKind.TEST.value, data=data
    )
    now = event.created_at
    delivery = WebhookDelivery.objects.create(
        event=event, endpoint=endpoint, next_attempt_at=now, created_at=now
    )
    job_publish(DELIVER_TASK, refusal="log")
    return delivery
