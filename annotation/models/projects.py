"""Projects, their members and settings (their vocabularies, scales, consensus rules, roles and
sides, are in ``annotation.models.choices``), and one-time passwords."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from annotation.models.choices import ConsensusRule, Role, Scale

# Gold pairs (quality control). Every annotator answers a gold pair once, so its target is
# the column's largest value: more votes than a project has annotators, and the claim (and
# ``pair_claim_idx``) serve it unchanged.
GOLD_TARGET_VOTES = 32767
# Share of gold pairs an annotator must get right, unless the project sets another.
DEFAULT_GOLD_MIN_ACCURACY = 0.7
# Gold votes an annotator gives before their accuracy is judged: fewer say too little.
GOLD_MIN_VOTES = 5
# A vote given sooner than this after its pair was served is refused; 0 lets any vote in.
DEFAULT_MIN_SECONDS_PER_VOTE = 0


class Project(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    guidelines = models.TextField(blank=True, help_text="Markdown, rendered safely.")
    scale = models.CharField(max_length=16, choices=Scale.choices, default=Scale.TERNARY)
    overlap = models.PositiveSmallIntegerField(
        default=3, help_text="Independent votes each pair gets (k)."
    )
    consensus_rule = models.CharField(
        max_length=16, choices=ConsensusRule.choices, default=ConsensusRule.MAJORITY
    )
    min_agree = models.PositiveSmallIntegerField(
        default=2, help_text="Votes on one side needed for a majority consensus."
    )
    max_extra_votes = models.PositiveSmallIntegerField(
        default=2, help_text="Extra annotators a disputed pair may get before adjudication."
    )
    allow_media_urls = models.BooleanField(
        default=False, help_text="Let imports fetch images from public http(s) URLs."
    )
    lease_minutes = models.PositiveSmallIntegerField(default=15)
    require_rationale = models.BooleanField(default=False)
    gold_rate = models.FloatField(
        default=0.0, help_text="Share of claims that serve a gold pair (0 to 1)."
    )
    gold_min_accuracy = models.FloatField(
        default=DEFAULT_GOLD_MIN_ACCURACY,
        help_text="Share of gold pairs (0 to 1) an annotator must get right, "
        f"judged after {GOLD_MIN_VOTES} gold votes.",
    )
    gold_pause = models.BooleanField(
        default=False, help_text="Pause an annotator whose gold accuracy falls below it."
    )
    min_seconds_per_vote = models.PositiveSmallIntegerField(
        default=DEFAULT_MIN_SECONDS_PER_VOTE,
        help_text="Votes given sooner after the pair was served are refused (0: off).",
    )
    play_to_end = models.BooleanField(
        default=False,
        help_text="Votes are refused until the longest response's video and audio could have "
        "been played to the end since the pair was served.",
    )
    # Weakens the blinding (docs/curators.md, "Serving the original files"): for the few
    # projects whose judgement needs the file exactly as it came.
    media_serve_source = models.BooleanField(
        default=False,
        help_text="Annotators receive each media file as it came (its format, metadata and "
        "all) instead of the copy rebuilt without them: this weakens the blinding.",
    )
    # Tells annotators something of others' votes (docs/curators.md, "An annotator's own
    # history"): off unless the curators choose it.
    history_shows_consensus = models.BooleanField(
        default=False,
        help_text="Annotators' own history says, for decided pairs only, whether their vote "
        "matched the consensus: a summary of the other annotators' votes.",
    )
    paused = models.BooleanField(default=False)
    # Whether the project has an active webhook (kept by annotation.webhooks.services): the
    # vote path reads it on the row it loaded, so a project without one writes no event.
    webhooks_active = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="project_overlap_positive"),
            models.CheckConstraint(
                condition=Q(min_agree__gte=1), name="project_min_agree_positive"
            ),
            models.CheckConstraint(
                condition=Q(gold_rate__gte=0) & Q(gold_rate__lte=1), name="project_gold_rate_share"
            ),
            models.CheckConstraint(
                condition=Q(gold_min_accuracy__gte=0) & Q(gold_min_accuracy__lte=1),
                name="project_gold_min_accuracy_share",
            ),
            models.CheckConstraint(condition=Q(scale__in=Scale.values), name="project_scale_valid"),
            models.CheckConstraint(
                condition=Q(consensus_rule__in=ConsensusRule.values),
                name="project_consensus_rule_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.min_agree and self.overlap and self.min_agree > self.overlap:
            raise ValidationError({"min_agree": "Cannot exceed the overlap target."})
        if self.consensus_rule == ConsensusRule.MMRB2 and self.scale != Scale.LIKERT6:
            raise ValidationError(
                {"consensus_rule": "The mmrb2 rule reads MMRB2's 1-6 scale: use likert6."}
            )

    @property
    def has_tie(self) -> bool:
        return self.scale == Scale.TERNARY


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    # An annotator paused by the gold check gets no pairs until a curator unpauses them; their
    # accuracy is then judged afresh on the gold votes they give after ``gold_judged_since``.
    paused = models.BooleanField(default=False)
    gold_judged_since = models.DateTimeField(null=True, blank=True)
    # The block the annotator is serving from (a ``claim_key``); their next claim looks there
    # first, then in the blocks after it. Null before their first claim (the first block).
    claim_cursor = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique"),
            models.CheckConstraint(condition=Q(role__in=Role.values), name="membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} as {self.role}"


class OneTimePassword(models.Model):
    """An account whose password was generated for it (a member added on Settings) and must
    be changed at its first login. ``password`` is the hash it was set with: once the account's
    password differs, by whatever path (the account page, the admin, ``changepassword``), the
    mark no longer applies."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="one_time_password",
    )
    password = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"one-time password of {self.user}"
