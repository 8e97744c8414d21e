"""Webhook deliveries against a real receiver on loopback (docs/webhooks.md): signed as
Standard Webhooks, written in the transaction of the change, retried with the same id until
a 2xx, a receiver that never answers timed out without holding the others, private targets
refused without the operator's setting."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from annotation.core.errors import InvalidInput
from annotation.decisions.services import pair_adjudicate
from annotation.models import Project, WebhookAttempt, WebhookDelivery, WebhookEvent
from annotation.webhooks.delivery import webhook_deliveries_send_due
from annotation.webhooks.services import webhook_create, webhook_redeliver, webhook_update
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db


def _disputed(project, external_id: str = "p1"):
    return PairFactory(project=project, external_id=external_id, status="disputed", task="t2i")


def _due_now() -> None:
    """Makes every waiting delivery due (the backoff is 0 s, but a clock tick may lag)."""
    WebhookDelivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())


def test_an_adjudication_is_delivered_signed_and_verifies(project, carol, receiver, hooked):
    target = receiver()
    endpoint = hooked(target.url)
    pair = _disputed(project)
    pair_adjudicate(pair=pair, curator=carol, label="A", note="clear")

    assert webhook_deliveries_send_due() == 1
    (request,) = target.requests
    payload = Webhook(endpoint.secret).verify(request.body, request.headers)
    assert payload["type"] == "pair.decided"
    assert payload["id"] == request.headers["webhook-id"]
    assert payload["data"] == {
        "project": "demo",
        "pair": {"id": "p1", "task": "t2i"},
        "label": "A",
        "by": "adjudication",
    }
    # Another endpoint's secret does not verify it.
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 32).verify(request.body, request.headers)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("delivered", 1, None)
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code == 200
    assert '"seen"' in attempt.excerpt


def test_500_twice_then_200_delivers_one_event_once_with_the_same_id(
    project, carol, receiver, hooked
):
    target = receiver(statuses=[500, 500, 200])
    hooked(target.url)
    pair_adjudicate(pair=_disputed(project), curator=carol, label="B", note="clear")

    for _ in range(5):
        _due_now()
        webhook_deliveries_send_due()
    assert len(target.requests) == 3
    assert WebhookEvent.objects.count() == 1
    ids = {request.headers["webhook-id"] for request in target.requests}
    bodies = {request.body for request in target.requests}
    assert len(ids) == 1
    assert len(bodies) == 1
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("delivered", 3)
    codes = list(delivery.log.order_by("pk").values_list("status_code", flat=True))
    assert codes == [500, 500, 200]


def test_a_failure_waits_for_its_backoff(project, carol, receiver, hooked, settings):
    settings.ARBITER_WEBHOOK_BACKOFF_S = 60
    target = receiver(statuses=[503])
    hooked(target.url)
    pair_adjudicate(pair=_disputed(project), curator=carol, label="B", note="clear")
    webhook_deliveries_send_due()
    assert webhook_deliveries_send_due() == 0  # not due again for a minute
    delivery = WebhookDelivery.objects.get()
    wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    assert delivery.status == "pending"
    assert 50 < wait <= 75


def test_after_its_retry_window_a_delivery_is_marked_failed_and_redeliver_sends_it_again(
    project, carol, receiver, hooked
):
    target = receiver(statuses=[500, 200])
    hooked(target.url)
    pair_adjudicate(pair=_disputed(project), curator=carol, label="A", note="clear")
    day_ago = timezone.now() - timedelta(days=1, seconds=1)
    WebhookDelivery.objects.update(created_at=day_ago)
    webhook_deliveries_send_due()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.next_attempt_at) == ("failed", None)

    webhook_redeliver(delivery=delivery)
    assert webhook_deliveries_send_due() == 1
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    assert target.requests[0].headers["webhook-id"] == target.requests[1].headers["webhook-id"]


def test_a_receiver_that_never_answers_times_out_without_holding_the_others(
    project, carol, receiver, hooked
):
    silent = receiver(hold_s=30)
    prompt = receiver()
    hooked(silent.url)
    hooked(prompt.url)
    pair_adjudicate(pair=_disputed(project), curator=carol, label="A", note="clear")

    started = time.monotonic()
    assert webhook_deliveries_send_due() == 2
    assert time.monotonic() - started < 5  # the 1 s timeout, not the receiver's 30 s
    by_url = {d.endpoint.url: d for d in WebhookDelivery.objects.select_related("endpoint")}
    assert by_url[prompt.url].status == "delivered"
    waiting = by_url[silent.url]
    assert waiting.status == "pending"
    assert waiting.attempts == 1
    attempt = waiting.log.get()
    assert attempt.status_code is None
    assert "no answer within 1 s" in attempt.excerpt
    # Tried again later, with the same id.
    _due_now()
    webhook_deliveries_send_due()
    ids = {request.headers["webhook-id"] for request in silent.requests}
    assert len(silent.requests) == 2
    assert len(ids) == 1


def test_a_private_target_is_refused_without_the_setting(
    project, carol, receiver, hooked, settings
):
    target = receiver()
    hooked(target.url)  # made while the setting allowed it
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(InvalidInput, match=r"url: host '127.0.0.1' resolves to 127.0.0.1"):
        webhook_create(project=project, url=target.url, events=["pair.decided"])
    for url in ("http://169.254.169.254/latest", "http://10.0.0.7/", "http://[::1]:8080/"):
        with pytest.raises(InvalidInput, match="not a public address"):
            webhook_create(project=project, url=url, events=["pair.decided"])

    pair_adjudicate(pair=_disputed(project), curator=carol, label="A", note="clear")
    webhook_deliveries_send_due()
    assert target.requests == []  # checked again on the address it would connect to
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code is None
    assert "not a public address" in attempt.excerpt


def test_no_event_is_written_when_its_transaction_rolls_back(project, carol, receiver, hooked):
    hooked(receiver().url)
    pair = _disputed(project)
    written = []

    def adjudicate_then_fail():
        with transaction.atomic():
            pair_adjudicate(pair=pair, curator=carol, label="A", note="clear")
            written.append(WebhookEvent.objects.count())
            raise RuntimeError("the change fails after the event was written")

    with pytest.raises(RuntimeError):
        adjudicate_then_fail()
    assert written == [1]
    assert WebhookEvent.objects.count() == 0
    assert WebhookDelivery.objects.count() == 0
    pair.refresh_from_db()
    assert pair.status == "disputed"


def test_a_project_without_an_active_webhook_writes_no_event(project, carol, receiver, hooked):
    endpoint = hooked(receiver().url)
    assert Project.objects.get(pk=project.pk).webhooks_active
    webhook_update(endpoint=endpoint, active=False)
    fresh = Project.objects.get(pk=project.pk)
    assert not fresh.webhooks_active
    pair = _disputed(fresh)
    pair_adjudicate(pair=pair, curator=carol, label="A", note="clear")
    assert WebhookEvent.objects.count() == 0


def test_an_endpoint_gets_only_the_events_it_takes(project, carol, receiver, hooked):
    decided = receiver()
    escalated = receiver()
    hooked(decided.url, events=("pair.decided",))
    hooked(escalated.url, events=("pair.escalated", "release.built"))
    pair_adjudicate(pair=_disputed(project), curator=carol, label="A", note="clear")
    webhook_deliveries_send_due()
    assert len(decided.requests) == 1
    assert escalated.requests == []
    assert json.loads(decided.requests[0].body)["type"] == "pair.decided"


@pytest.mark.django_db(transaction=True)
def test_two_senders_at_once_send_each_delivery_once(project, carol, receiver, hooked, monkeypatch):
    # No task after commit (eager in the tests, it would send them all before the senders).
    monkeypatch.setattr("annotation.core.webhook_events.job_publish", lambda *a, **k: None)
    target = receiver(hold_s=0.5)
    for _ in range(3):
        hooked(target.url)
    pair_adjudicate(pair=_disputed(project), curator=carol, label="A", note="clear")
    sent = []

    def sender():
        try:
            sent.append(webhook_deliveries_send_due())
        finally:
            connection.close()

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(sent) == 3  # the SKIP LOCKED claim split them; none went twice
    assert len(target.requests) == 3
    assert WebhookDelivery.objects.filter(status="delivered", attempts=1).count() == 3
