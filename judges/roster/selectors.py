"""Reads for judges: the judges a project may use."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet

from annotation.models import Project
from judges.models import Judge


def judges_for_project(project: Project) -> QuerySet[Judge]:
    """The judges ``project`` may run: those listing it, and those listing no project at all.
    Every way of starting a run chooses among these, and treats any other name as unknown."""
    listed = Judge.projects.through.objects.filter(judge_id=OuterRef("pk"))
    return Judge.objects.filter(~Exists(listed) | Exists(listed.filter(project=project)))
