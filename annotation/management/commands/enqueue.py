from __future__ import annotations

from django.core.management.base import CommandError

from annotation.decisions.lifecycle import pairs_enqueue
from annotation.management.projects import ProjectCommand
from annotation.pairs.selectors import project_tasks


class Command(ProjectCommand):
    help = (
        "Send the project's imported pairs to the annotators' queue without a filter run"
        " (all of them, or those of one task)."
    )

    refusal = "slug: no project {slug!r}"

    def add_project_arguments(self, parser):
        parser.add_argument("--task", help="only pairs of this task (t2i, edit, ...)")

    def handle_project(self, project, **options):
        task = options["task"]
        if task is not None and task not in project_tasks(project=project):
            known = ", ".join(project_tasks(project=project)) or "none"
            raise CommandError(
                f"--task: no pairs of task {task!r} in {project.slug} (tasks: {known})"
            )
        count = pairs_enqueue(project=project, task=task)
        which = f" of task {task}" if task else ""
        self.stdout.write(
            self.style.SUCCESS(f"Queued {count} imported pair{'s' if count != 1 else ''}{which}.")
        )
