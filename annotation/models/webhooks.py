"""Webhooks (docs/webhooks.md): a project's endpoints, the outbox of events written in the
transaction of the change each reports, one delivery per event and endpoint (scheduled by
``next_attempt_at``, claimed with SKIP LOCKED), and the log of every attempt."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from annotation.models.projects import Project


class WebhookEventKind(models.TextChoices):
    PAIR_DECIDED = "pair.decided", "Pair decided"
    PAIR_ESCALATED = "pair.escalated", "Pair sent to adjudication"
    PAIR_FLAGGED = "pair.flagged", "Pair flagged by an annotator"
    IMPORT_FINISHED = "import.finished", "Import finished"
    IMPORT_FAILED = "import.failed", "Import failed"
    FILTER_RUN_FINISHED = "filter_run.finished", "Filter run finished"
    RELEASE_BUILT = "release.built", "Release built"
    RELEASE_PUBLISHED = "release.published", "Release published"
    # Sent by the Test button only, to one endpoint.
    TEST = "webhook.test", "Test"


SUBSCRIBABLE_EVENTS = tuple(kind for kind in WebhookEventKind.values if kind != "webhook.test")


class WebhookEndpoint(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    # Event kinds it receives (SUBSCRIBABLE_EVENTS).
    events = models.JSONField(default=list)
    # "whsec_" and base64 of 24 random bytes; shown to the curator once, when made or rotated.
    secret = models.CharField(max_length=100)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.url


class WebhookEvent(models.Model):
    """The outbox: one row per event, its body encoded once so that every attempt sends the
    same bytes under the same ``webhook-id``."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32, choices=WebhookEventKind.choices)
    msg_id = models.CharField(max_length=40, unique=True)
    body = models.TextField()
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.kind} {self.msg_id}"


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    # When a sender may take it next; null once delivered or failed. A sender that takes it
    # moves it past its own timeout first, so a sender that dies leaves it due again.
    next_attempt_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    # A Redeliver starts the retry window afresh from here.
    retried_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["-pk"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="webhook_delivery_due_idx",
                condition=Q(next_attempt_at__isnull=False),
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "delivered", "failed"]),
                name="webhook_delivery_status_valid",
            )
        ]


class WebhookAttempt(models.Model):
    """One HTTP request of a delivery, as the delivery log shows it."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="log")
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True)
    # The start of the receiver's answer, or why there was none (refused, timed out).
    excerpt = models.TextField(blank=True)

    class Meta:
        ordering = ["-pk"]
