"""Flags on a pair (docs/curators.md, "Flags"): an annotator says what is wrong with a pair,
curators reply and resolve. A reply is for the flag's author only."""

from __future__ import annotations

from typing import TypeAlias

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.models.choices import FlagKind
from annotation.models.pairs import Pair


class Flag(models.Model):
    Kind: TypeAlias = FlagKind

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="flags")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="flags"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        constraints = [
            # One open flag per annotator and pair; once resolved, she may flag it again.
            models.UniqueConstraint(
                fields=["pair", "annotator"],
                condition=Q(resolved_at__isnull=True),
                name="flag_one_open_per_annotator",
            ),
            models.CheckConstraint(condition=Q(kind__in=FlagKind.values), name="flag_kind_valid"),
            models.CheckConstraint(
                condition=~Q(kind=FlagKind.OTHER) | ~Q(note=""), name="flag_other_has_note"
            ),
            models.CheckConstraint(
                condition=Q(resolved_at__isnull=False) | Q(resolved_by__isnull=True),
                name="flag_resolver_only_when_resolved",
            ),
        ]
        indexes = [
            models.Index(fields=["annotator", "created_at"], name="flag_annotator_idx"),
            models.Index(
                fields=["pair"], condition=Q(resolved_at__isnull=True), name="flag_open_idx"
            ),
        ]

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class FlagComment(models.Model):
    """A curator's reply to a flag, shown to the flag's author and to the project's staff."""

    flag = models.ForeignKey(Flag, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.CheckConstraint(condition=~Q(text=""), name="flag_comment_not_empty")]
