"""Content: media (stored once by the hash of their bytes), prompts and responses (ids derived
from what they are, see ``annotation.core.content``)."""

from __future__ import annotations

from typing import ClassVar, TypeAlias

from django.db import models
from django.db.models import F, Q

from annotation.core.media_keys import URL_KEY_LENGTH, media_url_key
from annotation.core.search import text_parts
from annotation.models.choices import MediaFormat, MediaKind, MediaStripResult
from annotation.models.projects import Project


class UrlKeyField(models.CharField):
    """``Media.url_key``: filled from the row's sha256 by every insert through the ORM
    (``save``, ``create``, ``bulk_create``) that leaves it empty, as ``auto_now`` fills a date;
    the importer's own inserts set it themselves."""

    def pre_save(self, model_instance, add):
        if add and not getattr(model_instance, self.attname):
            setattr(model_instance, self.attname, media_url_key(model_instance.sha256))
        return super().pre_save(model_instance, add)


class Media(models.Model):
    """A media file (image, video, audio clip or binary glTF model), stored once per sha256 of
    its original bytes (never re-encoded), and the copy served in the app: the same frames and
    samples without their metadata (``served_sha256``). Video and audio carry what PyAV probed
    at import (docs/import-format.md, "Video, audio and 3D")."""

    Kind: TypeAlias = MediaKind
    Format: TypeAlias = MediaFormat
    StripResult: TypeAlias = MediaStripResult

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
    # A 3D model's views rendered at import (annotation/media/glb_render.py): the hashes of
    # image ``Media`` (PNG), in the order of ``glb_render.VIEWS``.
    rendered_views = models.JSONField(null=True, blank=True)
    # An audio file's integrated loudness in LUFS (ITU-R BS.1770, EBU R 128), measured at
    # import (annotation/media/loudness.py); NULL for silence and for other kinds.
    loudness_lufs = models.FloatField(null=True, blank=True)
    # Made once at import; NULL for media imported before served copies existed, until
    # ``strip_media_metadata`` (or the first request for it) makes the copy.
    served_sha256 = models.CharField(
        max_length=64, null=True, blank=True, help_text="sha256 of the copy served in the app"
    )
    strip_result = models.CharField(
        max_length=16, choices=StripResult.choices, null=True, blank=True
    )
    # The served copy's own format when it differs from the original's (a rebuilt copy: PNG
    # for images, MP4 for video, M4A for audio); NULL when it is the original's format.
    served_format = models.CharField(max_length=8, choices=Format.choices, null=True, blank=True)
    # The served video's own frame rate (the player steps one frame of it); NULL until a
    # served copy is recorded, and for other kinds. ``frame_rate`` is the original's.
    served_frame_rate = models.FloatField(null=True, blank=True)
    # The opaque id that names this media in URLs (``annotation.core.media_keys``): an HMAC of
    # ``sha256``, never the hash itself, so an annotator cannot look the file up.
    url_key = UrlKeyField(max_length=URL_KEY_LENGTH, unique=True)
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
                )
                # A copy written anew from the decoded content may, rarely, equal the original.
                | Q(strip_result="rebuilt", served_sha256__isnull=False),
                name="media_served_copy_recorded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} {self.format} {self.width}x{self.height}"

    CONTENT_TYPES: ClassVar[dict[str, str]] = {
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
    EXTENSIONS: ClassVar[dict[str, str]] = {
        "JPEG": "jpg", "PNG": "png", "WEBP": "webp", "GIF": "gif", "MP4": "mp4", "WEBM": "webm",
        "M4A": "m4a", "MP3": "mp3", "WAV": "wav", "OGG": "ogg", "FLAC": "flac", "GLB": "glb",
    }  # fmt: skip

    @property
    def content_type(self) -> str:
        """The original's content type."""
        return self.CONTENT_TYPES[self.format]

    @property
    def served_content_type(self) -> str:
        """The served copy's content type."""
        return self.CONTENT_TYPES[self.served_format or self.format]

    @property
    def relative_path(self) -> str:
        """The original's name in the storage's media area (annotation/core/storage.py)."""
        return self.path_for(self.sha256, self.format)

    @property
    def served_relative_path(self) -> str:
        """The served copy's name in the storage's media area (the original's when unchanged)."""
        if self.served_sha256 is None:
            raise ValueError(f"Media {self.sha256} has no served copy yet (strip_media_metadata)")
        return self.path_for(self.served_sha256, self.served_format or self.format)

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
