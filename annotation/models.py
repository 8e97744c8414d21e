"""Arbiter's domain: projects, members, content (prompts, responses, media), pairs, the
annotation queue (assignments, votes, skips) and what later stages derive from them.

Ids of prompts and responses are derived from their content (see ``annotation.content``), so
an import knows every foreign key before it writes a row and identical content is stored once.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from annotation.errors import Conflict
from annotation.search import SearchWordsField, text_parts


class Scale(models.TextChoices):
    BINARY = "binary", "Binary (left / right)"
    TERNARY = "ternary", "Ternary (left / tie / right)"
    LIKERT6 = "likert6", "Likert 1-6 (MMRB2)"


class ConsensusRule(models.TextChoices):
    MAJORITY = "majority", "Majority"
    MMRB2 = "mmrb2", "MMRB2"
    UNANIMOUS = "unanimous", "Unanimous"


class Role(models.TextChoices):
    ANNOTATOR = "annotator", "Annotator"
    CURATOR = "curator", "Curator"
    RESEARCHER = "researcher", "Researcher"


class Side(models.TextChoices):
    """A preference in canonical terms: which stored response is better."""

    A = "A", "A"
    B = "B", "B"
    TIE = "tie", "Tie"


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

# Serving order within one priority (annotation/selectors.py, ``NEXT_PAIR_SQL``; docs/
# architecture.md, "Serving order"): pairs are served in blocks of ``CLAIM_BLOCK_PAIRS``
# consecutive ids, the blocks in the order of a scrambled block number, ``claim_key``, the same
# for everyone, so the votes on a block's pairs arrive together and its pairs finish early;
# within a block each annotator takes the pairs in an order of their own (``claim_rank``).
# The key is a bijection onto [0, CLAIM_KEY_MODULUS) (the modulus is prime and the
# multiplier, about the modulus over the golden ratio, is coprime to it), so consecutive
# blocks land far apart and a project's blocks are not served in the order of its import.
CLAIM_KEY_MODULUS = 2_147_483_647
CLAIM_KEY_MULTIPLIER = 1_327_217_884
CLAIM_BLOCK_PAIRS = 64


# Integer arithmetic both databases index and match as written (Django's Mod would cast to
# numeric on PostgreSQL); the claim's raw SQL uses the same text with the table's alias.
# ("%%%%" is one "%" once Django and the database driver have each read it.)
CLAIM_KEY_TEMPLATE = (
    f"(((%(expressions)s / {CLAIM_BLOCK_PAIRS}) %%%% {CLAIM_KEY_MODULUS})"
    f" * {CLAIM_KEY_MULTIPLIER}) %%%% {CLAIM_KEY_MODULUS}"
)


class ClaimKey(models.Func):
    template = CLAIM_KEY_TEMPLATE
    output_field = models.BigIntegerField()


def claim_key(pair_id: int) -> int:
    """The place of the pair's block in the serving order within its priority (as
    ``pair_claim_idx``): the same for every pair of the block."""
    block = pair_id // CLAIM_BLOCK_PAIRS
    return (block % CLAIM_KEY_MODULUS) * CLAIM_KEY_MULTIPLIER % CLAIM_KEY_MODULUS


def claim_walk(annotator_id: int) -> tuple[int, int]:
    """The annotator's own order within a block: the multiplier and offset of ``claim_rank``
    (a multiplier in [1, modulus), so the ranks of distinct ids below the modulus differ)."""
    multiplier = 1 + claim_key(annotator_id * CLAIM_BLOCK_PAIRS) % (CLAIM_KEY_MODULUS - 1)
    offset = claim_key((annotator_id + 1) * CLAIM_BLOCK_PAIRS)
    return multiplier, offset


def claim_rank(pair_id: int, walk: tuple[int, int]) -> int:
    """The pair's place within its block for the annotator whose ``claim_walk`` is ``walk``
    (as ``annotation.selectors.CLAIM_RANK_SQL``)."""
    multiplier, offset = walk
    return ((pair_id % CLAIM_KEY_MODULUS) * multiplier + offset) % CLAIM_KEY_MODULUS


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
    paused = models.BooleanField(default=False)
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


class Media(models.Model):
    """A media file (image, video, audio clip or binary glTF model), stored once per sha256 of
    its original bytes (never re-encoded), and the copy served in the app: the same frames and
    samples without their metadata (``served_sha256``). Video and audio carry what PyAV probed
    at import (docs/import-format.md, "Video, audio and 3D")."""

    class Kind(models.TextChoices):
        IMAGE = "image", "image"
        VIDEO = "video", "video"
        AUDIO = "audio", "audio"
        MODEL3D = "model3d", "3D model"

    class Format(models.TextChoices):
        JPEG = "JPEG", "JPEG"
        PNG = "PNG", "PNG"
        WEBP = "WEBP", "WebP"
        GIF = "GIF", "GIF"
        MP4 = "MP4", "MP4"
        WEBM = "WEBM", "WebM"
        M4A = "M4A", "M4A"
        MP3 = "MP3", "MP3"
        WAV = "WAV", "WAV"
        OGG = "OGG", "Ogg"
        FLAC = "FLAC", "FLAC"
        GLB = "GLB", "binary glTF"

    class StripResult(models.TextChoices):
        UNCHANGED = "unchanged", "nothing to strip: the original is served"
        STRIPPED = "stripped", "metadata removed from the container, pixels untouched"
        REENCODED = "reencoded", "re-encoded losslessly without metadata"
        TRANSCODED = "transcoded", "transcoded into a format browsers play, without metadata"
        FAILED = "failed", "could not be stripped: the original is served"

    sha256 = models.CharField(max_length=64, primary_key=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.IMAGE)
    format = models.CharField(max_length=8, choices=Format.choices)
    # Pixels of an image or a video's frames; 0 for audio and 3D models.
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    size_bytes = models.PositiveBigIntegerField()
    # Probed once at import (video and audio); empty or NULL for images and models.
    container = models.CharField(max_length=64, blank=True, default="")
    video_codec = models.CharField(max_length=32, blank=True, default="")
    audio_codec = models.CharField(max_length=32, blank=True, default="")
    duration_seconds = models.FloatField(null=True, blank=True)
    frame_rate = models.FloatField(null=True, blank=True)
    sample_rate = models.PositiveIntegerField(null=True, blank=True)
    channels = models.PositiveSmallIntegerField(null=True, blank=True)
    # A video's first frame, stored as an image ``Media`` (PNG) by its hash.
    poster_sha256 = models.CharField(max_length=64, null=True, blank=True)
    # An audio track's loudness outline: WAVEFORM_PEAKS maxima of |sample| in 0..1.
    peaks = models.JSONField(null=True, blank=True)
    # Made once at import; NULL for media imported before served copies existed, until
    # ``strip_media_metadata`` (or the first request for it) makes the copy.
    served_sha256 = models.CharField(
        max_length=64, null=True, blank=True, help_text="sha256 of the copy served in the app"
    )
    strip_result = models.CharField(
        max_length=16, choices=StripResult.choices, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "media"
        constraints = [
            models.CheckConstraint(
                condition=Q(kind="image", format__in=["JPEG", "PNG", "WEBP", "GIF"])
                | Q(kind="video", format__in=["MP4", "WEBM"])
                | Q(kind="audio", format__in=["M4A", "MP3", "WAV", "OGG", "FLAC", "WEBM"])
                | Q(kind="model3d", format="GLB"),
                name="media_format_valid",
            ),
            models.CheckConstraint(
                condition=(Q(width__gt=0) & Q(height__gt=0)) | Q(kind__in=["audio", "model3d"]),
                name="media_dimensions_positive",
            ),
            # A copy is served exactly when the stripping was recorded, and it is the
            # original exactly when nothing was (or could be) stripped.
            models.CheckConstraint(
                condition=Q(served_sha256__isnull=True, strip_result__isnull=True)
                | Q(strip_result__in=["unchanged", "failed"], served_sha256=F("sha256"))
                | (
                    Q(
                        strip_result__in=["stripped", "reencoded", "transcoded"],
                        served_sha256__isnull=False,
                    )
                    & ~Q(served_sha256=F("sha256"))
                ),
                name="media_served_copy_recorded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} {self.format} {self.width}x{self.height}"

    CONTENT_TYPES = {
        "JPEG": "image/jpeg",
        "PNG": "image/png",
        "WEBP": "image/webp",
        "GIF": "image/gif",
        "MP4": "video/mp4",
        "WEBM": "video/webm",
        "M4A": "audio/mp4",
        "MP3": "audio/mpeg",
        "WAV": "audio/wav",
        "OGG": "audio/ogg",
        "FLAC": "audio/flac",
        "GLB": "model/gltf-binary",
    }
    EXTENSIONS = {
        "JPEG": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif", "MP4": "mp4", "WEBM": "webm",
        "M4A": "m4a", "MP3": "mp3", "WAV": "wav", "OGG": "ogg", "FLAC": "flac", "GLB": "glb",
    }  # fmt: skip

    @property
    def content_type(self) -> str:
        return self.CONTENT_TYPES[self.format]

    @property
    def relative_path(self) -> str:
        """Where the original bytes live under MEDIA_ROOT."""
        return self.path_for(self.sha256, self.format)

    @property
    def served_relative_path(self) -> str:
        """Where the served copy lives under MEDIA_ROOT (the original's path when unchanged)."""
        if self.served_sha256 is None:
            raise ValueError(f"Media {self.sha256} has no served copy yet (strip_media_metadata)")
        return self.path_for(self.served_sha256, self.format)

    @classmethod
    def path_for(cls, sha256: str, image_format: str) -> str:
        """Where bytes with this hash live: sharded by hash, never by user input."""
        return f"{sha256[:2]}/{sha256[2:4]}/{sha256}.{cls.EXTENSIONS[image_format]}"


class ProjectMedia(models.Model):
    """Which media a project's content uses: the access check for serving media is one lookup."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    media = models.ForeignKey(Media, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "media"], name="project_media_unique")
        ]


class ContentMixin(models.Model):
    """Ordered content parts, interleaved: ``[{"type": "text", "text": ...},
    {"type": "image", "media": sha256}]``. Image parts reference ``Media`` by hash."""

    id = models.UUIDField(primary_key=True, editable=False)
    content = models.JSONField()

    class Meta:
        abstract = True

    @property
    def text(self) -> str:
        return "\n\n".join(text_parts(self.content))

    @property
    def media_hashes(self) -> list[str]:
        return [p["media"] for p in self.content if p["type"] == "image"]


class Prompt(ContentMixin):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="prompts")
    source = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.text[:80] or f"prompt {self.id}"


class Response(ContentMixin):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="responses")
    model_name = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"{self.model_name or 'unknown model'}: {self.text[:60]}"


class PairStatus(models.TextChoices):
    IMPORTED = "imported", "Imported"
    JUDGING = "judging", "Judging"
    EASY = "easy", "Easy (filtered by judges)"
    QUEUED = "queued", "Queued"
    ANNOTATING = "annotating", "Annotating"
    CONSENSUS = "consensus", "Consensus"
    DISPUTED = "disputed", "Disputed"


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
    # A video or audio part waits for its playable copy (``TranscodeJob``): not claimed.
    media_pending = models.BooleanField(
        default=False, help_text="Held back from annotators until its media are playable."
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
    # Consensus (annotation/services/pairs.py writes these; docs/agreement.md)
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
    # names (annotation.search.search_words), written by the importer; GIN-indexed on
    # PostgreSQL by migration 0011 (an index no other database has).
    search_words = SearchWordsField(blank=True, default="", editable=False)
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


class ImportJob(models.Model):
    """One import of a file: its progress while running and its outcome afterwards."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="imports")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    filename = models.CharField(max_length=255)
    upload_path = models.CharField(max_length=500, blank=True)
    media_archive_path = models.CharField(max_length=500, blank=True)
    bytes_total = models.PositiveBigIntegerField(default=0)
    bytes_done = models.PositiveBigIntegerField(default=0)
    lines_done = models.PositiveIntegerField(default=0)
    created_pairs = models.PositiveIntegerField(default=0)
    existing_pairs = models.PositiveIntegerField(default=0)
    created_media = models.PositiveIntegerField(default=0)
    decided_pairs = models.PositiveIntegerField(
        default=0, help_text="New pairs whose prior votes reached their target: decided."
    )
    errors = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the job last moved on; an unfinished job whose progress_at is older than
    # ARBITER_STALLED_AFTER_S lost its worker and is resumed.
    progress_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.filename} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == self.Status.SUCCEEDED:
            return 100
        if not self.bytes_total:
            return 0
        return min(99, int(100 * self.bytes_done / self.bytes_total))

    @property
    def finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED}

    @property
    def transcoding(self) -> bool:
        """Some of the files it brought still wait for their playable copy."""
        return self.transcodes.filter(status__in=["pending", "running"]).exists()


class TranscodeJob(models.Model):
    """The making of the playable copy of a video or audio file that a browser cannot play as
    it is (``annotation.imports.transcode_jobs``): one per such media, retried after a failure."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Transcoding"
        SUCCEEDED = "succeeded", "Playable"
        FAILED = "failed", "Failed"

    media = models.OneToOneField(Media, on_delete=models.CASCADE, related_name="transcode")
    # The import that brought the file first, where its progress is shown.
    import_job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="transcodes"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    progress = models.FloatField(default=0.0, help_text="Share of the file done, 0 to 1.")
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # An unfinished job whose progress_at is older than ARBITER_STALLED_AFTER_S is sent again.
    progress_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1), name="transcode_progress_share"
            )
        ]

    def __str__(self) -> str:
        return f"transcode of {self.media_id[:12]} ({self.status})"

    @property
    def percent(self) -> int:
        return 100 if self.status == self.Status.SUCCEEDED else min(99, int(100 * self.progress))

    @property
    def finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED}


class Assignment(models.Model):
    """A lease on one slot of a pair for one annotator, with the left/right order shown."""

    class Status(models.TextChoices):
        LIVE = "live", "Live"
        VOTED = "voted", "Voted"
        SKIPPED = "skipped", "Skipped"
        RELEASED = "released", "Released"

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments"
    )
    left_is_a = models.BooleanField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.LIVE)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

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
    class Reason(models.TextChoices):
        CANNOT_JUDGE = "cannot_judge", "I cannot judge this"
        BROKEN = "broken", "Broken content"
        UNSAFE = "unsafe", "Unsafe content"

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


class ReportSource(models.TextChoices):
    """Which votes an agreement report counts: the project's own, its prior annotations (from
    the import, as external raters), or both."""

    ALL = "all", "Votes and prior annotations"
    VOTES = "votes", "Votes"
    PRIOR = "prior", "Prior annotations"


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


# ---- Releases (docs/releases.md) ----

# X.Y.Z, each a number without leading zeros (semantic versioning's core, no pre-release tag)
# of at most RELEASE_VERSION_PART_DIGITS digits. The one rule of a valid version: the model's
# constraint, the path converter (url_converters), the form, the API and the command line all
# take it from here, so a version that is stored is one a URL can name.
RELEASE_VERSION_PART_DIGITS = 9
RELEASE_VERSION_PART_MAX = 10**RELEASE_VERSION_PART_DIGITS - 1
_VERSION_PART = rf"(?:0|[1-9][0-9]{{0,{RELEASE_VERSION_PART_DIGITS - 1}}})"
RELEASE_VERSION_REGEX = rf"{_VERSION_PART}\.{_VERSION_PART}\.{_VERSION_PART}"
RELEASE_VERSION_PATTERN = rf"^{RELEASE_VERSION_REGEX}$"


class ReleaseFrozen(Conflict):
    """A published release was asked to change: a change is a new version."""


class ReleaseQuerySet(models.QuerySet):
    """Bulk writes that would touch a published release are refused, so no code path (a
    service, the admin, a shell) changes one; the rows it leaves alone are written as asked."""

    def _refuse_published(self, action: str) -> None:
        published = self.filter(status=Release.Status.PUBLISHED).values_list("version", flat=True)
        if versions := list(published[:5]):
            raise ReleaseFrozen(
                f"Cannot {action} published release {', '.join(versions)}: a published "
                "release never changes; make a new version."
            )

    def update(self, **kwargs):
        self._refuse_published("update")
        # A release published between the check and the UPDATE is still left alone.
        return super(ReleaseQuerySet, self.exclude(status=Release.Status.PUBLISHED)).update(
            **kwargs
        )

    update.alters_data = True  # type: ignore[attr-defined]

    def delete(self):
        self._refuse_published("delete")
        return super().delete()

    delete.alters_data = True  # type: ignore[attr-defined]


class Release(models.Model):
    """A versioned export of a project's decided pairs (docs/releases.md). Built into a folder
    and one .tar.gz under ARBITER_RELEASE_ROOT; once published, it never changes."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        QUEUED = "queued", "Build queued"
        BUILDING = "building", "Building"
        BUILT = "built", "Built"
        FAILED = "failed", "Build failed"
        PUBLISHED = "published", "Published"

    # PROTECT: deleting the project or a user would otherwise delete or rewrite published
    # releases behind the model's back (the deletion collector runs its own SQL).
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=32, help_text="X.Y.Z, unique in the project.")
    selection = models.JSONField(help_text="Which pairs go in (docs/releases.md, 'Selection').")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # The build's progress, polled by the release page.
    stage = models.CharField(max_length=32, blank=True)
    rows_total = models.PositiveIntegerField(default=0)
    rows_done = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    build_started_at = models.DateTimeField(null=True, blank=True)
    build_finished_at = models.DateTimeField(null=True, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)
    # What the build made.
    pair_count = models.PositiveIntegerField(default=0)
    statistics = models.JSONField(default=dict, blank=True)
    card = models.TextField(blank=True, help_text="The dataset card (README.md) as built.")
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    archive_sha256 = models.CharField(max_length=64, blank=True)
    archive_size = models.PositiveBigIntegerField(default=0)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = ReleaseQuerySet.as_manager()

    class Meta:
        ordering = ["project", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="release_version_unique"),
            models.CheckConstraint(
                condition=Q(version__regex=RELEASE_VERSION_PATTERN), name="release_version_semver"
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=["draft", "queued", "building", "built", "failed", "published"]
                ),
                name="release_status_valid",
            ),
            # Only a built release (its manifest hashed) is ever published.
            models.CheckConstraint(
                condition=~Q(status="published")
                | (Q(published_at__isnull=False) & ~Q(manifest_sha256="")),
                name="release_published_is_built",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project.slug}@{self.version}"

    def save(self, *args, **kwargs) -> None:
        if self._stored_published():
            raise ReleaseFrozen(
                f"Release {self.version} is published and never changes; make a new version."
            )
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._stored_published():
            raise ReleaseFrozen(f"Release {self.version} is published and cannot be deleted.")
        return super().delete(*args, **kwargs)

    def _stored_published(self) -> bool:
        return (
            self.pk is not None
            and type(self)._base_manager.filter(pk=self.pk, status=self.Status.PUBLISHED).exists()
        )

    @property
    def is_published(self) -> bool:
        return self.status == self.Status.PUBLISHED

    @property
    def percent(self) -> int:
        """The build's progress for a progress bar, 0 to 100."""
        if self.status in (self.Status.BUILT, self.Status.PUBLISHED):
            return 100
        if self.status != self.Status.BUILDING or not self.rows_total:
            return 0
        return min(99, int(100 * self.rows_done / self.rows_total))

    @property
    def folder(self) -> Path:
        """The built release: ``<ARBITER_RELEASE_ROOT>/<slug>/<version>/``."""
        return Path(settings.ARBITER_RELEASE_ROOT) / self.project.slug / self.version

    @property
    def archive_name(self) -> str:
        return f"{self.project.slug}-{self.version}.tar.gz"

    @property
    def archive_path(self) -> Path:
        """The one .tar.gz of the folder, next to it."""
        return Path(settings.ARBITER_RELEASE_ROOT) / self.project.slug / self.archive_name


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
