"""The project a command is about, named by its slug."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project


def command_project(slug: str, *, refusal: str = "No project with slug {slug!r}") -> Project:
    """The project with this slug; without one, a CommandError saying ``refusal`` (formatted
    with the slug)."""
    project = Project.objects.filter(slug=slug).first()
    if project is None:
        raise CommandError(refusal.format(slug=slug))
    return project


class ProjectCommand(BaseCommand):
    """A command about one project, named by the slug that is its first argument: it declares
    the slug, looks the project up (``command_project``, refusing with ``refusal``) and hands it
    to ``handle_project``, so that no command reads a slug of its own."""

    refusal = "No project with slug {slug!r}"
    slug_help: str | None = None

    def add_arguments(self, parser):
        parser.add_argument("slug", help=self.slug_help)
        self.add_project_arguments(parser)

    def add_project_arguments(self, parser) -> None:
        """The command's arguments after the slug (none unless a command declares them)."""

    def handle(self, *args: Any, **options: Any) -> str | None:
        project = command_project(options["slug"], refusal=self.refusal)
        return self.handle_project(project, **options)

    def handle_project(self, project: Project, **options: Any) -> str | None:
        raise NotImplementedError("a ProjectCommand defines handle_project")
