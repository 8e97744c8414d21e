"""Judges, filter runs and their verdicts.

A verdict is unique per (run, judge, pair, order), so any batch may run twice harmlessly.
What the ensemble decides is written onto ``annotation.Pair`` (status, ensemble_*), so the
annotation app never imports this one.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import JobStatus, Pair, Project, Release
from config.queues import JUDGES_GPU, JUDGES_HTTP
from judges.ensemble import DEFAULT_EASY_THRESHOLD

DEFAULT_VIDEO_FRAMES = 8
DEFAULT_VIDEO_FRAME_SIDE = 512


class Judge(models.Model):
    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible chat completions"
        REWARD_MODEL = "reward_model", "Local reward model (torch)"
        HEURISTIC = "heuristic", "Built-in heuristics"
        SCORES = "scores", "Scores from the pair's metadata"

    name = models.SlugField(max_length=80, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    enabled = models.BooleanField(default=True)
    # openai
    # A CharField: cluster hosts without a dot (http://vllm:8000/v1) are valid base URLs, which
    # URLField rejects; judges.roster.services.judge_check validates it.
    base_url = models.CharField(
        max_length=500, blank=True, help_text="OpenAI-compatible base URL, e.g. http://host/v1"
    )
    model = models.CharField(max_length=200, blank=True)
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable holding the API key; the key is never stored.",
    )
    temperature = models.FloatField(default=0.0)
    max_tokens = models.PositiveIntegerField(default=1024)
    timeout_s = models.FloatField(default=60.0)
    concurrency = models.PositiveSmallIntegerField(default=16, help_text="Requests in flight.")
    requests_per_minute = models.PositiveIntegerField(default=0, help_text="0 means no limit.")
    max_image_side = models.PositiveIntegerField(default=1024)
    # A video goes to the judge as this many frames sampled uniformly, each scaled so its
    # longest side is at most video_frame_side (annotation/media/judge_parts.py).
    video_frames = models.PositiveSmallIntegerField(
        default=DEFAULT_VIDEO_FRAMES, help_text="Frames sampled uniformly from each video."
    )
    video_frame_side = models.PositiveIntegerField(
        default=DEFAULT_VIDEO_FRAME_SIDE, help_text="Longest side of each frame sent (pixels)."
    )
    takes_audio = models.BooleanField(
        default=False,
        help_text="The model accepts input_audio parts; otherwise pairs with audio are refused.",
    )
    # reward_model
    checkpoint = models.CharField(max_length=500, blank=True)
    device = models.CharField(max_length=16, default="cpu", help_text="cpu, cuda or cuda:N")
    batch_size = models.PositiveIntegerField(default=64)
    # Anything kind-specific beyond the above (prompt template overrides, score keys, ...).
    options = models.JSONField(default=dict, blank=True)
    # Which projects may run this judge (judges.roster.selectors.judges_for_project); none listed:
    # every project may, an operator's choice for judges without a key or prompts to guard.
    projects = models.ManyToManyField(
        Project,
        blank=True,
        related_name="judges",
        help_text="Projects whose curators may run this judge; leave empty for every project.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["openai", "reward_model", "heuristic", "scores"]),
                name="judge_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        """HTTP judges and torch judges go to separate queues (GPU machines take torch work)."""
        return JUDGES_GPU if self.kind == self.Kind.REWARD_MODEL else JUDGES_HTTP


class FilterRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="filter_runs")
    # "Run 3" of its project, assigned by filter_run_create; URLs keep the primary key.
    number = models.PositiveIntegerField()
    judges = models.ManyToManyField(Judge, related_name="runs")
    pairs = models.ManyToManyField(Pair, related_name="filter_runs", blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    threshold = models.FloatField(default=DEFAULT_EASY_THRESHOLD)
    budget_per_task = models.PositiveIntegerField(
        null=True, blank=True, help_text="Queue only the N most contested pairs per task."
    )
    # filter_run_create sets it (by default one per judge, judges.ensemble.default_min_votes);
    # runs from before the setting keep 1, the rule they were decided by.
    min_valid_votes = models.PositiveIntegerField(
        default=1, help_text="A pair is easy only with at least this many valid votes."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True)
    # Written when the run finishes: pair counts by outcome and per-judge statistics.
    summary = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Last resume (a curator's or the periodic one): counts as progress, like a new verdict.
    resumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(threshold__gt=0.5) & Q(threshold__lte=1),
                name="filter_run_threshold_range",
            ),
            models.CheckConstraint(
                condition=Q(min_valid_votes__gte=1), name="filter_run_min_valid_votes_positive"
            ),
            models.UniqueConstraint(
                fields=["project", "number"], name="filter_run_number_unique_per_project"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.number} on {self.project.slug} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED, self.Status.CANCELLED}


class FilterRunBatch(models.Model):
    """One slice of a run's work, as queued: the message that carries it and any batch task
    of the run pulling work while its judges have free slots both claim it by setting
    ``owner`` (the claiming task's id) from blank, so one task judges it; a task delivered
    again after its process died takes back what its id owns (docs/judges-runs.md, "How a
    run executes")."""

    run = models.ForeignKey(FilterRun, on_delete=models.CASCADE, related_name="batches")
    queue = models.CharField(max_length=32)
    # [[judge_id, [[pair_id, order], ...]], ...], the message's ``work``
    work = models.JSONField()
    owner = models.CharField(max_length=255, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["run", "queue", "owner"], name="filter_run_batch_claim")]

    def __str__(self) -> str:
        return f"batch {self.pk} of run {self.run_id} ({self.owner or 'unclaimed'})"


# An answer that is a vote has a side, and only such an answer has one.
SIDE_MATCHES_OUTCOME = (Q(outcome="ok") & Q(side__in=["A", "B", "tie"])) | (
    ~Q(outcome="ok") & Q(side="")
)


class Answer(models.Model):
    """What one judge said about one pair in one presentation order, in canonical A/B terms:
    the fields a filter run's verdict and an evaluation's judgement share."""

    class Order(models.TextChoices):
        AB = "AB", "A shown first"
        BA = "BA", "B shown first"

    class Outcome(models.TextChoices):
        OK = "ok", "Parsed"
        UNPARSEABLE = "unparseable", "Answer could not be parsed"
        ERROR = "error", "Permanent error"
        ABSTAIN = "abstain", "Judge abstained (not a vote)"
        SKIPPED = "skipped", "Skipped: the judge is not sent a kind of part the pair holds"

    # Subclasses add ``judge`` and ``pair``, each with its own reverse name.
    order = models.CharField(max_length=2, choices=Order.choices)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    side = models.CharField(
        max_length=4, blank=True, help_text="A, B or tie in canonical terms; blank unless ok."
    )
    confidence = models.FloatField(null=True, blank=True)
    reasoning = models.TextField(blank=True)
    raw = models.TextField(blank=True, help_text="The judge's raw answer, for auditing parsing.")
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1, help_text="Calls it took (retries + 1).")
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class Verdict(Answer):
    """One judge's answer on one pair in one presentation order, in a filter run."""

    run = models.ForeignKey(FilterRun, on_delete=models.CASCADE, related_name="verdicts")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="verdicts")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="verdicts")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "judge", "pair", "order"], name="verdict_unique_per_order"
            ),
            models.CheckConstraint(
                condition=SIDE_MATCHES_OUTCOME,
                name="verdict_side_matches_outcome",
            ),
        ]
        indexes = [models.Index(fields=["run", "judge"], name="verdict_run_judge_idx")]


class JudgeEvaluation(models.Model):
    """A judge scored against a target: a release of a project, or (``release`` blank) the
    project's current consensus. One per (judge, project, release); evaluating again replaces
    its results. ``target`` is the labelled pairs as they were when the evaluation started
    (judges.evaluation.scoring.TargetItem fields, as lists); ``results`` is what scoring them
    gave."""

    Status = JobStatus

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="evaluations")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="evaluations")
    release = models.CharField(
        max_length=32, blank=True, help_text="The release version (X.Y.Z); blank: consensus."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    seed = models.PositiveIntegerField(default=0, help_text="Seed of the bootstrap intervals.")
    target = models.JSONField(default=list, blank=True)
    results = models.JSONField(default=dict, blank=True)
    calls = models.PositiveIntegerField(default=0, help_text="Judge calls this evaluation needed.")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The last start, batch written or resume: Celery beat resumes a running evaluation whose
    # progress is older than ARBITER_STALLED_AFTER_S (its queued work was lost).
    progress_at = models.DateTimeField(null=True, blank=True)

    # ``release`` of an evaluation on the imported reference labels (Pair.prior_label): not a
    # version, which is always X.Y.Z, so no release can take it.
    REFERENCE = "reference"

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "project", "release"], name="evaluation_unique_per_target"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge.name} on {self.target_name} ({self.status})"

    @property
    def target_name(self) -> str:
        """``SLUG@X.Y.Z`` for a release, ``SLUG:reference`` for the reference labels, ``SLUG``
        (current consensus) otherwise."""
        if self.release == self.REFERENCE:
            return f"{self.project.slug}:{self.REFERENCE}"
        return f"{self.project.slug}@{self.release}" if self.release else self.project.slug

    @property
    def finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED}


class Judgement(Answer):
    """A judge's answer outside filter runs: called for an evaluation, or imported from a
    judge run elsewhere. One per (judge, pair, order); evaluations of the same judge share them.
    ``margin``: the judge's score difference (A minus B) when it gives scores."""

    class Source(models.TextChoices):
        CALL = "call", "Called by Arbiter"
        IMPORT = "import", "Imported"

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="judgements")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="judgements")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CALL)
    margin = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "pair", "order"], name="judgement_unique_per_order"
            ),
            models.CheckConstraint(
                condition=SIDE_MATCHES_OUTCOME,
                name="judgement_side_matches_outcome",
            ),
        ]


class TrainingRun(models.Model):
    """One reward-model training (judges.reward_model.services): what it learned from, its
    options, its progress and per-epoch metrics, and the checkpoint it wrote."""

    Status = JobStatus

    class Source(models.TextChoices):
        CONSENSUS = "consensus", "The project's current consensus"
        RELEASE = "release", "A published release"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="training_runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CONSENSUS)
    release = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # What the pairs were once read: kind, label, counts, sha256 (and a release's manifest hash).
    source_info = models.JSONField(default=dict, blank=True)
    # The trainer's options (judges.reward_model.trainer.TrainingOptions).
    features = models.CharField(max_length=16, default="hashed")
    epochs = models.PositiveIntegerField()
    lr = models.FloatField()
    batch_size = models.PositiveIntegerField()
    seed = models.PositiveIntegerField()
    patience = models.PositiveIntegerField()
    holdout = models.FloatField()
    device = models.CharField(max_length=16, default="cpu")
    out_dir = models.CharField(max_length=500, blank=True, help_text="Where the checkpoint goes.")
    register_name = models.CharField(
        max_length=80, blank=True, help_text="Register the checkpoint as a judge of this name."
    )
    # Progress and results
    progress = models.FloatField(default=0.0, help_text="0 to 1.")
    phase = models.CharField(max_length=32, blank=True, help_text="What the run is doing now.")
    history = models.JSONField(
        default=list,
        blank=True,
        help_text="Per epoch: epoch, train_loss, heldout_loss, heldout_accuracy.",
    )
    best_epoch = models.PositiveIntegerField(null=True, blank=True)
    heldout_accuracy = models.FloatField(null=True, blank=True)
    train_pairs = models.PositiveIntegerField(null=True, blank=True)
    heldout_pairs = models.PositiveIntegerField(null=True, blank=True)
    checkpoint = models.CharField(max_length=500, blank=True)
    judge = models.ForeignKey(
        Judge, null=True, blank=True, on_delete=models.SET_NULL, related_name="training_runs"
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written with each progress update; a running run without one for long lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The process that holds a running run, "host:pid:start" (judges.reward_model.services): a
    # job delivered again after that process was killed takes the run over at once.
    worker = models.CharField(max_length=300, blank=True)
    # Runs of its job that took it (counted and committed before any work): one that reaches
    # ARBITER_JOB_MAX_ATTEMPTS unfinished is quarantined (annotation.core.jobs).
    attempts = models.PositiveSmallIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1),
                name="training_run_progress_range",
            ),
            models.CheckConstraint(
                condition=Q(source="consensus", release__isnull=True)
                | Q(source="release", release__isnull=False),
                name="training_run_release_has_version",
            ),
        ]

    def __str__(self) -> str:
        return f"training {self.pk} on {self.source_label} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED}

    @property
    def source_label(self) -> str:
        """``SLUG`` for the consensus, ``SLUG@X.Y.Z`` for a release."""
        return str(self.release) if self.release else self.project.slug

    @property
    def percent(self) -> int:
        return int(100 * self.progress)


class BestOfNRun(models.Model):
    """A best-of-N run started on its page, kept so its bracket or scores can be seen and
    downloaded again. ``outcome`` is what ``judges.best_of_n.services.best_of_n`` returned."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="best_of_n_runs")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="best_of_n_runs")
    method = models.CharField(max_length=16)
    prompts = models.PositiveIntegerField()
    outcome = models.JSONField(default=dict)
    # What was judged, for the run's page: ``[{"id", "prompt", "candidates": [{"id",
    # "content"}]}]`` in stored content parts; empty for runs made before it was kept.
    contents = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"best-of-N {self.pk} on {self.project.slug} by {self.judge.name}"
