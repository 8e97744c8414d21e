"""Sending what is due (docs/webhooks.md, "Retries"): deliveries are scheduled in the database
by ``next_attempt_at``, never by the broker's countdowns. A sender claims the due ones with
``SELECT ... FOR UPDATE SKIP LOCKED`` and moves each past its own timeout before sending, so
two senders never send one at once and a sender that dies leaves it due again. The requests
go out side by side (an endpoint that never answers holds one thread for the timeout, not
the others), and each answer is logged; a failure is tried again after a backoff doubling to
its cap, until the delivery's retry window has passed, then it is marked failed."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import WebhookAttempt, WebhookDelivery
from annotation.webhooks.transport import Answer, signed_headers, webhook_post

# Deliveries one sender claims at a time, and the requests it has in flight at once.
CLAIM_BATCH = 50
SENDERS = 8
Status = WebhookDelivery.Status


@dataclass(frozen=True)
class _Claimed:
    delivery_id: int
    attempts: int
    url: str
    secret: str
    msg_id: str
    body: str
    retry_until: datetime


def retry_delay_s(attempts: int) -> float:
    """The wait before the next try of a delivery that failed ``attempts`` times: the
    backoff doubling from ARBITER_WEBHOOK_BACKOFF_S to its cap, with up to a quarter more at
    random so that a receiver back from an outage is not hit by every retry at once."""
    base = settings.ARBITER_WEBHOOK_BACKOFF_S * 2 ** min(attempts - 1, 30)
    delay = min(base, settings.ARBITER_WEBHOOK_BACKOFF_MAX_S)
    return delay * random.uniform(1.0, 1.25)


def _claim(now: datetime, limit: int) -> list[_Claimed]:
    lease = timedelta(seconds=settings.ARBITER_WEBHOOK_TIMEOUT_S * 2 + 30)
    with transaction.atomic():
        due = list(
            WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(next_attempt_at__lte=now, status=Status.PENDING)
            .order_by("next_attempt_at")
            .select_related("event", "endpoint")[:limit]
        )
        WebhookDelivery.objects.filter(pk__in=[d.pk for d in due]).update(
            next_attempt_at=now + lease
        )
    retry_for = timedelta(seconds=settings.ARBITER_WEBHOOK_RETRY_FOR_S)
    return [
        _Claimed(
            delivery_id=d.pk,
            attempts=d.attempts + 1,
            url=d.endpoint.url,
            secret=d.endpoint.secret,
            msg_id=d.event.msg_id,
            body=d.event.body,
            retry_until=(d.retried_at or d.created_at) + retry_for,
        )
        for d in due
    ]


def _send(claimed: _Claimed) -> tuple[datetime, Answer]:
    at = timezone.now()
    headers = signed_headers(secret=claimed.secret, msg_id=claimed.msg_id, body=claimed.body, at=at)
    return at, webhook_post(url=claimed.url, body=claimed.body, headers=headers)


def _record(claimed: _Claimed, at: datetime, answer: Answer) -> None:
    now = timezone.now()
    WebhookAttempt.objects.create(
        delivery_id=claimed.delivery_id,
        started_at=at,
        duration_ms=answer.duration_ms,
        status_code=answer.status_code,
        excerpt=answer.excerpt,
    )
    if answer.ok:
        changes = {"status": Status.DELIVERED, "next_attempt_at": None, "finished_at": now}
    elif now >= claimed.retry_until:
        changes = {"status": Status.FAILED, "next_attempt_at": None, "finished_at": now}
    else:
        wait = timedelta(seconds=retry_delay_s(claimed.attempts))
        changes = {"next_attempt_at": now + wait}
    # Only the delivery as this sender claimed it: a Redeliver meanwhile starts it afresh.
    WebhookDelivery.objects.filter(
        pk=claimed.delivery_id, status=Status.PENDING, attempts=claimed.attempts - 1
    ).update(attempts=claimed.attempts, **changes)


def webhook_deliveries_send_due(*, limit: int = CLAIM_BATCH) -> int:
    """Sends up to ``limit`` due deliveries and records each answer; returns how many."""
    claimed = _claim(timezone.now(), limit)
    if not claimed:
        return 0
    # Each answer is recorded as it comes (here, on this thread's database connection), so a
    # slow endpoint delays no other's log.
    with ThreadPoolExecutor(max_workers=min(SENDERS, len(claimed))) as pool:
        sending = {pool.submit(_send, one): one for one in claimed}
        for done in as_completed(sending):
            _record(sending[done], *done.result())
    return len(claimed)
