from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from annotation.management.errors import validation_message
from annotation.management.projects import ProjectCommand
from annotation.models import Role
from annotation.projects.services import member_add


class Command(ProjectCommand):
    help = "Add a user to a project with a role, creating the user when new."

    def add_project_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=Role.values, required=True)
        parser.add_argument(
            "--password", help="set this password (new users without one cannot log in)"
        )

    def handle_project(self, project, **options):
        try:
            membership, created, _ = member_add(
                project=project,
                username=options["username"],
                role=options["role"],
                password=options["password"],
            )
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        verb = "Created user" if created else "User"
        self.stdout.write(
            self.style.SUCCESS(
                f"{verb} {membership.user.username} is {membership.role} in {project.slug}"
            )
        )
