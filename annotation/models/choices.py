"""The app's vocabularies: every set of choices a column of ``annotation`` takes, in one place.

The models take their choices from here, and those nested in a model (``Media.Kind``,
``Release.Status``…) are these classes under the model's name, so ``Media.Kind.IMAGE`` is
``MediaKind.IMAGE``. The values are what the database stores and the check constraints name;
the labels are what forms, the admin and the pages show."""

from __future__ import annotations

from django.db import models

# Projects and their settings.


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


# Content.


class MediaKind(models.TextChoices):
    """``Media.Kind``."""

    IMAGE = "image", "image"
    VIDEO = "video", "video"
    AUDIO = "audio", "audio"
    MODEL3D = "model3d", "3D model"


class MediaFormat(models.TextChoices):
    """``Media.Format``: the container of the original bytes."""

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


class MediaStripResult(models.TextChoices):
    """``Media.StripResult``: how the served copy was made from the original."""

    UNCHANGED = "unchanged", "nothing to strip: the original is served"
    STRIPPED = "stripped", "metadata removed from the container, pixels untouched"
    REENCODED = "reencoded", "re-encoded losslessly without metadata"
    TRANSCODED = "transcoded", "transcoded into a format browsers play, without metadata"
    REBUILT = "rebuilt", "written anew from the decoded content, from an allowlist"
    FAILED = "failed", "could not be stripped: the original is served"


# Imports.


class JobStatus(models.TextChoices):
    """A background job's states: an import here, and the judges' evaluations and trainings."""

    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


# Pairs and the queue.


class PairStatus(models.TextChoices):
    IMPORTED = "imported", "Imported"
    JUDGING = "judging", "Judging"
    EASY = "easy", "Easy (filtered by judges)"
    QUEUED = "queued", "Queued"
    ANNOTATING = "annotating", "Annotating"
    CONSENSUS = "consensus", "Consensus"
    DISPUTED = "disputed", "Disputed"
    # Taken out by a curator (broken media, a bad prompt): never served, decided, released,
    # counted in agreement, leaderboards or judge scores; ``Pair.excluded_from`` keeps the
    # status it had, which including it again restores (docs/curators.md, "Excluding pairs").
    EXCLUDED = "excluded", "Excluded"


class AssignmentStatus(models.TextChoices):
    """``Assignment.Status``: a lease's states."""

    LIVE = "live", "Live"
    VOTED = "voted", "Voted"
    SKIPPED = "skipped", "Skipped"
    RELEASED = "released", "Released"


class SkipReason(models.TextChoices):
    """``Skip.Reason``."""

    CANNOT_JUDGE = "cannot_judge", "I cannot judge this"
    BROKEN = "broken", "Broken content"
    UNSAFE = "unsafe", "Unsafe content"


class FlagKind(models.TextChoices):
    """``Flag.Kind``: what an annotator says is wrong with a pair."""

    BROKEN_MEDIA = "broken_media", "Broken media"
    AMBIGUOUS_PROMPT = "ambiguous_prompt", "Ambiguous prompt"
    IDENTICAL = "identical", "Both responses identical"
    OTHER = "other", "Other (say what in the note)"


# Agreement and releases.


class ReportSource(models.TextChoices):
    """Which votes an agreement report counts: the project's own, its prior annotations (from
    the import, as external raters), or both."""

    ALL = "all", "Votes and prior annotations"
    VOTES = "votes", "Votes"
    PRIOR = "prior", "Prior annotations"


class ReleaseStatus(models.TextChoices):
    """``Release.Status``: a release's states, ``PUBLISHED`` for good."""

    DRAFT = "draft", "Draft"
    QUEUED = "queued", "Build queued"
    BUILDING = "building", "Building"
    BUILT = "built", "Built"
    FAILED = "failed", "Build failed"
    PUBLISHED = "published", "Published"
