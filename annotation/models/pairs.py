"""Pairs (their statuses are ``choices.PairStatus``) and the prior annotations imported with
them."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from annotation.core.claim_key import ClaimKey
from annotation.core.search import SearchWordsField
from annotation.models.choices import PairStatus, Side
from annotation.models.content import Prompt, Response
from annotation.models.projects import Project


class Pair(models.Model):
    """A comparison: one prompt, two responses. A and B are the imported (canonical) order."""

    # No single-column indexes where a composite one below starts with the column: every
    # index is paid for on each imported pair.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="pairs", db_index=False
    )
    external_id = models.CharField(max_length=255)
    prompt = models.ForeignKey(Prompt, on_delete=models.PROTECT, related_name="pairs")
    response_a = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="+")
    response_b = models.ForeignKey(Response, on_delete=models.PROTECT, related_name="+")
    criterion = models.TextField(blank=True)
    task = models.SlugField(max_length=64, blank=True, db_index=False)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=PairStatus.choices, default=PairStatus.IMPORTED
    )
    # Queue
    priority = models.SmallIntegerField(default=0, help_text="Higher is served first.")
    target_votes = models.PositiveSmallIntegerField(
        help_text="Votes this pair should get; the project's overlap, raised for disputes."
    )
    vote_count = models.PositiveSmallIntegerField(
        default=0, help_text="Votes counting towards the target (extra votes are not counted)."
    )
    lease_count = models.PositiveSmallIntegerField(
        default=0, help_text="Live leases; claims need vote_count + lease_count < target_votes."
    )
    restricted = models.BooleanField(
        default=False, help_text="Only the annotators in its restrictions may claim this pair."
    )
    # Quality control: the answer is known (``gold_label``). Gold pairs score annotators, get
    # no consensus and never count in agreement: ``is_gold`` is the one test for that.
    is_gold = models.BooleanField(default=False)
    gold_label = models.CharField(max_length=4, choices=Side.choices, blank=True)
    # What came with the import
    prior_label = models.CharField(max_length=4, choices=Side.choices, blank=True)
    # What the judge ensemble decided (written by judges, read by queue/consensus/releases)
    ensemble_label = models.CharField(max_length=4, choices=Side.choices, blank=True)
    ensemble_agreement = models.FloatField(null=True, blank=True)
    ensemble_summary = models.JSONField(default=dict, blank=True)
    # Consensus (annotation/decisions/lifecycle.py writes these; docs/agreement.md)
    consensus_label = models.CharField(max_length=4, choices=Side.choices, blank=True)
    dispute_reason = models.CharField(
        max_length=32, blank=True, help_text="Why the rule found no consensus, the last time."
    )
    extra_slots = models.PositiveSmallIntegerField(
        default=0,
        help_text="Votes disputes added to the target (at most the project's max_extra_votes).",
    )
    decided_at = models.DateTimeField(
        null=True, blank=True, help_text="When the consensus step or an adjudication last decided."
    )
    # The pairs browser's text search: the words of the id, the prompt's text and the model
    # names (annotation.core.search.search_words), written by the importer; GIN-indexed on
    # PostgreSQL by migration 0011 (an index no other database has).
    search_words = SearchWordsField(blank=True, default="", editable=False)
    # Exclusion (annotation/pairs/services.py): the status the pair had, the curator's reason.
    # Database defaults: rows written by COPY or raw SQL that name neither column are fine.
    excluded_from = models.CharField(
        max_length=16,
        choices=PairStatus.choices,
        blank=True,
        db_default="",
        help_text="The status an excluded pair had, restored when it is included again.",
    )
    exclusion_reason = models.TextField(blank=True, db_default="")
    excluded_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="pair_external_id_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=PairStatus.values), name="pair_status_valid"
            ),
            models.CheckConstraint(condition=Q(target_votes__gte=1), name="pair_target_positive"),
            models.CheckConstraint(
                condition=Q(is_gold=False) | ~Q(gold_label=""), name="pair_gold_has_label"
            ),
            models.CheckConstraint(
                condition=~Q(status="consensus") | ~Q(consensus_label=""),
                name="pair_consensus_has_label",
            ),
            # An excluded pair knows the status it came from, and only an excluded one does.
            models.CheckConstraint(
                condition=(Q(status="excluded") & ~Q(excluded_from__in=["", "excluded"]))
                | (~Q(status="excluded") & Q(excluded_from="")),
                name="pair_exclusion_consistent",
            ),
        ]
        indexes = [
            models.Index(fields=["project", "status", "-priority", "id"], name="pair_queue_idx"),
            # The claim walks this index in block order from the annotator's block to the
            # first pair it may take, then reads that block's entries (at most a block's).
            models.Index(
                F("project"),
                F("is_gold"),
                F("priority").desc(),
                ClaimKey(F("id")),
                name="pair_claim_idx",
                condition=Q(status__in=["queued", "annotating"])
                & Q(target_votes__gt=F("vote_count") + F("lease_count")),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}:{self.external_id}"


class PriorAnnotation(models.Model):
    """What came with the import as MMRB2's ``human_annotations``: a vote on the project's
    scale (``value``, ``label``), or a rating of one response (``response`` A or B and the
    ``rating`` as given: MMRB2's reasoning file rates each response by letter). Ratings are
    not votes: ``value`` is null on them, so consensus and agreement never count them."""

    # Indexed by the unique (pair, position) constraint.
    pair = models.ForeignKey(
        Pair, on_delete=models.CASCADE, related_name="prior_annotations", db_index=False
    )
    position = models.PositiveSmallIntegerField()
    value = models.SmallIntegerField(null=True, blank=True)
    label = models.CharField(max_length=4, choices=Side.choices, blank=True)
    response = models.CharField(max_length=1, blank=True, help_text="A or B: a rated response.")
    rating = models.CharField(max_length=16, blank=True, help_text="The rating, as imported.")

    class Meta:
        ordering = ["pair", "position"]
        constraints = [
            models.UniqueConstraint(fields=["pair", "position"], name="prior_annotation_unique")
        ]
