"""The annotation queue: assignments (leases), votes, skips and restrictions of pairs to
annotators."""

from __future__ import annotations

from typing import TypeAlias

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models.choices import AssignmentStatus, Side, SkipReason
from annotation.models.pairs import Pair


class Assignment(models.Model):
    """A lease on one slot of a pair for one annotator, with the left/right order shown."""

    Status: TypeAlias = AssignmentStatus

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments"
    )
    left_is_a = models.BooleanField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.LIVE)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    # Claimed ahead for the comparison page, which prepares the pair while the annotator
    # answers the one before it; not shown yet (docs/curators.md, "The next pair, prepared
    # ahead"). The claim that serves it clears this and starts its clock anew.
    ahead = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            # One live lease per (pair, annotator): a second tab gets the same assignment.
            models.UniqueConstraint(
                fields=["pair", "annotator"],
                condition=Q(status="live"),
                name="assignment_one_live_per_annotator",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["live", "voted", "skipped", "released"]),
                name="assignment_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["annotator", "status"], name="assignment_annotator_idx"),
            models.Index(fields=["pair", "status", "expires_at"], name="assignment_pair_live_idx"),
            # Each claim frees expired leases first; this keeps that a range scan of expired ones.
            models.Index(
                fields=["expires_at"], condition=Q(status="live"), name="assignment_expiry_idx"
            ),
        ]


class Vote(models.Model):
    """A human judgement, stored in canonical A/B terms with the order it was shown in."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="votes")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="votes"
    )
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="vote"
    )
    side = models.CharField(max_length=4, choices=Side.choices)
    value = models.SmallIntegerField(
        help_text="Canonical: binary/ternary 1=B 2=tie 3=A; likert6 1..6, 6=A much better."
    )
    left_is_a = models.BooleanField()
    rationale = models.TextField(blank=True)
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True)
    is_extra = models.BooleanField(
        default=False, help_text="Arrived after the pair had its target."
    )
    is_adjudication = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pair", "annotator"], name="vote_one_per_annotator"),
            models.CheckConstraint(condition=Q(side__in=Side.values), name="vote_side_valid"),
            models.CheckConstraint(
                condition=Q(value__gte=1) & Q(value__lte=6), name="vote_value_range"
            ),
        ]
        indexes = [models.Index(fields=["annotator", "created_at"], name="vote_annotator_idx")]


class Skip(models.Model):
    Reason: TypeAlias = SkipReason

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="skips")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="skips"
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pair", "annotator"], name="skip_one_per_annotator")
        ]


class PairRestriction(models.Model):
    """When a pair has restrictions, only the listed annotators may claim it."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="restrictions")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pair", "annotator"], name="pair_restriction_unique")
        ]
