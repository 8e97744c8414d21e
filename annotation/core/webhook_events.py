"""The webhook outbox's one writer (docs/webhooks.md): the service that makes a change calls
``webhook_event_record`` in the transaction that makes it, so the event exists exactly when
the change committed. It writes the event and one delivery per active endpoint that takes
its kind, and sends the delivery task once the transaction commits; the periodic sweep
sends whatever that task missed. A project without an active webhook costs one attribute
read on the project row its caller already holds."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import connection
from django.utils import timezone

from annotation.core.jobs import job_publish
from annotation.models import Project, WebhookDelivery, WebhookEndpoint, WebhookEvent

DELIVER_TASK = "annotation.webhooks_deliver_due"

# INSERT ... SELECT: the deliveries of one event in one statement, for the endpoints of its
# project that are active and take its kind.
_FAN_OUT_SQL = f"""
INSERT INTO "{WebhookDelivery._meta.db_table}"
    (event_id, endpoint_id, status, attempts, next_attempt_at, created_at, retried_at, finished_at)
SELECT %s, id, 'pending', 0, %s, %s, NULL, NULL FROM "{WebhookEndpoint._meta.db_table}"
WHERE project_id = %s AND active AND CAST(events AS TEXT) LIKE %s
"""


def webhook_event_body(*, kind: str, msg_id: str, at: str, data: dict[str, Any]) -> str:
    """The JSON every endpoint receives: the Standard Webhooks envelope."""
    return json.dumps({"type": kind, "id": msg_id, "timestamp": at, "data": data})


def webhook_event_create(*, project_id: int, kind: str, data: dict[str, Any]) -> WebhookEvent:
    """The outbox row of one event, with a new ``webhook-id`` and its body encoded once."""
    now = timezone.now()
    msg_id = f"msg_{uuid.uuid4().hex}"
    body = webhook_event_body(kind=kind, msg_id=msg_id, at=now.isoformat(), data=data)
    return WebhookEvent.objects.create(
        project_id=project_id, kind=kind, msg_id=msg_id, body=body, created_at=now
    )


def webhook_event_record(*, project: Project, kind: str, data: dict[str, Any]) -> int:
    """Writes an event of ``kind`` about ``project`` with ``data`` to the outbox, and its
    deliveries; returns how many deliveries. Nothing when the project has no active webhook
    (``Project.webhooks_active``, as the caller loaded the row). Call it in the transaction
    of the change it reports."""
    if not project.webhooks_active:
        return 0
    event = webhook_event_create(project_id=project.pk, kind=kind, data=data)
    now = event.created_at
    # ``events`` is a JSON list of kinds; its text holds '"kind"' exactly when it lists it.
    with connection.cursor() as cursor:
        cursor.execute(_FAN_OUT_SQL, [event.pk, now, now, project.pk, f'%"{kind}"%'])
        fanned = cursor.rowcount
    if fanned:
        job_publish(DELIVER_TASK, refusal="log")
    return fanned
