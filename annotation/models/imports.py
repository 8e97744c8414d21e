"""Import jobs: an uploaded pairs file and its progress."""

from __future__ import annotations

from typing import TypeAlias

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotation.models.choices import JobStatus
from annotation.models.projects import Project


class ImportJob(models.Model):
    """One import of a file: its progress while running and its outcome afterwards."""

    Status: TypeAlias = JobStatus

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="imports")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    filename = models.CharField(max_length=255)
    upload_path = models.CharField(max_length=500, blank=True)
    media_archive_path = models.CharField(max_length=500, blank=True)
    # An import from the bucket: the key prefix its media paths are read under
    # (annotation/imports/bucket.py); None for an upload or a command-line import.
    media_bucket_prefix = models.CharField(max_length=500, null=True, blank=True)
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
    # Runs of its task that started (counted and committed before any work): one that
    # reaches ARBITER_JOB_MAX_ATTEMPTS unfinished is quarantined (annotation.core.jobs).
    attempts = models.PositiveSmallIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)

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
