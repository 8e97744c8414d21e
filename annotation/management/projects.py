"""The project a command is about, named by its slug."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotation.models import Project


def command_project(slug: str, *, refusal: str = "No project with slug {slug!r}") -> Project:
    """The project with this slug; without one, a CommandError saying ``refusal`` (formatted
    with the slug)."""
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise CommandError(refusal.format(slug=slug))
    return project
