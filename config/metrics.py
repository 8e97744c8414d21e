"""``/metrics`` for Prometheus (docs/deploy.md, "Metrics"): django-prometheus's request
metrics (latency by view), Arbiter's counters (``annotation/core/metrics.py``), and what is
read when scraped: pairs by state (one grouped count) and the Celery queues' depths (the
broker's message count of each queue). Only with ``Authorization: Bearer
$ARBITER_METRICS_TOKEN``; without the setting the URL answers 404.

Several gunicorn workers or a prefork Celery worker each count in their own process: with
``PROMETHEUS_MULTIPROC_DIR`` set they write their counts to files there, which
prometheus-client's ``MultiProcessCollector`` adds up on every scrape. A Celery worker node
serves its own jobs' metrics on ``ARBITER_WORKER_METRICS_PORT`` (``worker_metrics_serve``)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import Http404, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from config.celery import app as celery_app
from config.queues import QUEUES

logger = logging.getLogger(__name__)


def process_registry() -> CollectorRegistry:
    """The counts of every process of this node (``PROMETHEUS_MULTIPROC_DIR``), or of this
    process alone."""
    if not settings.PROMETHEUS_MULTIPROC_DIR:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    return registry


class ScrapeTimeCollector(Collector):
    """What the database and the broker say at scrape time, the same on every node."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from annotation.models import Pair, PairStatus

        pairs = GaugeMetricFamily(
            "arbiter_pairs", "Pairs by state, all projects.", labels=["state"]
        )
        counts = dict(Pair.objects.values_list("status").annotate(n=Count("id")).order_by())
        for state in PairStatus.values:
            pairs.add_metric([state], counts.get(state, 0))
        yield pairs
        yield from _queue_depths()


def _queue_depths() -> Iterator[GaugeMetricFamily]:
    depth = GaugeMetricFamily(
        "arbiter_queue_depth", "Messages waiting in each Celery queue.", labels=["queue"]
    )
    up = GaugeMetricFamily("arbiter_broker_up", "1 when the broker answered this scrape.")
    try:
        with celery_app.connection_for_read() as conn:
            channel: Any = conn.default_channel  # kombu's virtual channel, untyped
            for queue in QUEUES:
                # A declaration answers the queue's message count (Redis: its list's length).
                depth.add_metric([queue], channel.queue_declare(queue=queue).message_count)
    except Exception as exc:  # the scrape still answers, saying the broker did not
        logger.warning("Queue depths not read: %s", type(exc).__name__)
        up.add_metric([], 0)
        yield up
        return
    up.add_metric([], 1)
    yield up
    yield depth


def _authorised(request) -> bool:
    expected = f"Bearer {settings.ARBITER_METRICS_TOKEN}".encode()
    given = request.headers.get("Authorization", "").encode()
    return hmac.compare_digest(given, expected)


@require_GET
@never_cache
def metrics(request):
    """The exposition text; 404 when metrics are off, 401 without the operator's token."""
    if not settings.ARBITER_METRICS_TOKEN:
        raise Http404("Metrics are off.")
    if not _authorised(request):
        response = HttpResponse("A bearer token is required.", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    scraped = CollectorRegistry()
    scraped.register(ScrapeTimeCollector())
    body = generate_latest(process_registry()) + generate_latest(scraped)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def worker_metrics_serve() -> None:
    """Serves this worker node's job metrics (every pool process's, through
    ``PROMETHEUS_MULTIPROC_DIR``) on ``ARBITER_WORKER_METRICS_PORT`` when set: Prometheus
    scrapes each worker node, on the internal network only (no token there)."""
    port = settings.ARBITER_WORKER_METRICS_PORT
    if port:
        start_http_server(
            port, addr=settings.ARBITER_WORKER_METRICS_ADDRESS, registry=process_registry()
        )
