"""Through a real Celery worker on Redis serving the ``webhooks`` queue: the event a committed
change writes is delivered by the task sent after its commit, with no sweep and no countdown."""

from __future__ import annotations

import time

import pytest

from annotation.decisions.services import pair_adjudicate
from annotation.models import WebhookDelivery
from config.queues import WEBHOOKS
from tests.factories import PairFactory

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_worker_on_the_webhooks_queue_delivers_after_commit(
    celery_worker_process, project, carol, receiver, hooked
):
    target = receiver()
    hooked(target.url)
    celery_worker_process(
        queues=WEBHOOKS, concurrency=1, extra_env={"ARBITER_WEBHOOK_ALLOW_PRIVATE": "true"}
    )
    pair = PairFactory(project=project, external_id="w1", status="disputed")
    pair_adjudicate(pair=pair, curator=carol, label="A", note="clear")
    deadline = time.monotonic() + 60
    while not target.requests and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(target.requests) == 1
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if WebhookDelivery.objects.filter(status="delivered").exists():
            break
        time.sleep(0.2)
    assert WebhookDelivery.objects.get().status == "delivered"
