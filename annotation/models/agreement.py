"""Adjudications of disputed pairs and the cached agreement reports."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models.choices import ReportSource, Side
from annotation.models.pairs import Pair
from annotation.models.projects import Project


class Adjudication(models.Model):
    """A curator's decision on a disputed pair: the pair's label, with who, when and why. Never
    a vote: agreement never counts it. A new decision supersedes the live one, which is kept."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="adjudications")
    curator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="adjudications"
    )
    label = models.CharField(max_length=4, choices=Side.choices)
    note = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pair", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair"],
                condition=Q(superseded_at__isnull=True),
                name="adjudication_one_live_per_pair",
            ),
            models.CheckConstraint(
                condition=Q(label__in=Side.values), name="adjudication_label_valid"
            ),
            models.CheckConstraint(condition=~Q(note=""), name="adjudication_has_note"),
        ]

    def __str__(self) -> str:
        return f"{self.pair} adjudicated {self.label} by {self.curator}"


class AgreementReport(models.Model):
    """The last agreement report of a project from one source (docs/agreement.md, "The
    report"): one row per project and source, replaced when it is computed again."""

    # Indexed by the unique (project, source) constraint.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="agreement_reports", db_index=False
    )
    source = models.CharField(max_length=8, choices=ReportSource.choices)
    # When the votes were read: the report holds every vote committed before it.
    computed_at = models.DateTimeField()
    data = models.JSONField()
    votes_seen = models.PositiveIntegerField(help_text="Votes and prior annotations counted.")
    # When a vote last queued a refresh: no other is queued until the debounce window is over.
    refresh_requested_at = models.DateTimeField(null=True, blank=True)
    # When Recompute last queued one: no other is queued until it has run (or is given up).
    recompute_requested_at = models.DateTimeField(null=True, blank=True)
    # Refreshes started since the report was last stored (counted and committed before any
    # work): at ARBITER_JOB_MAX_ATTEMPTS none runs again until a curator's Recompute, and
    # ``refresh_error`` says why (annotation.core.jobs).
    attempts = models.PositiveSmallIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    refresh_error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "source"], name="agreement_report_one_per_source"
            ),
            models.CheckConstraint(
                condition=Q(source__in=ReportSource.values), name="agreement_report_source_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"agreement report of {self.project_id} ({self.source}, {self.computed_at})"
