"""Releases (docs/releases.md): versioned, frozen once published."""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.core.errors import Conflict
from annotation.models.choices import ReleaseStatus
from annotation.models.projects import Project

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

    Status: TypeAlias = ReleaseStatus

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
    # Runs of the build's task that took it (counted and committed before any work), since it
    # was queued: one that reaches ARBITER_JOB_MAX_ATTEMPTS unfinished is quarantined.
    attempts = models.PositiveSmallIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
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
