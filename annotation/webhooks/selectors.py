"""What the Webhooks pages and API read: a project's endpoints with their deliveries' counts,
one endpoint of the project (404 for another project's), and its delivery log."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q, QuerySet
from django.http import Http404

from annotation.models import Project, WebhookAttempt, WebhookDelivery, WebhookEndpoint

# Deliveries an endpoint's log shows, newest first.
LOG_DELIVERIES = 50
_STATUS = WebhookDelivery.Status


def project_webhooks(*, project: Project) -> QuerySet[WebhookEndpoint]:
    """The project's endpoints, each with how many deliveries are pending, delivered, failed."""
    return WebhookEndpoint.objects.filter(project=project).annotate(
        **{
            f"{status}_count": Count("deliveries", filter=Q(deliveries__status=status))
            for status in _STATUS.values
        }
    )


def webhook_of_project(*, project: Project, webhook_id: int) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(project=project, pk=webhook_id).first()
    if endpoint is None:
        raise Http404("No such webhook")
    return endpoint


def delivery_of_webhook(*, endpoint: WebhookEndpoint, delivery_id: int) -> WebhookDelivery:
    delivery = WebhookDelivery.objects.filter(endpoint=endpoint, pk=delivery_id).first()
    if delivery is None:
        raise Http404("No such delivery")
    return delivery


def webhook_log(*, endpoint: WebhookEndpoint, limit: int = LOG_DELIVERIES) -> list[WebhookDelivery]:
    """The endpoint's latest deliveries with their event and every attempt, newest first."""
    attempts = Prefetch("log", queryset=WebhookAttempt.objects.order_by("-pk"))
    return list(
        WebhookDelivery.objects.filter(endpoint=endpoint)
        .select_related("event")
        .prefetch_related(attempts)
        .order_by("-pk")[:limit]
    )
