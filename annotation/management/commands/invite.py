from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from annotation.management.errors import validation_message
from annotation.management.projects import ProjectCommand
from annotation.models import Role
from annotation.projects.invitations import invitation_create


class Command(ProjectCommand):
    help = (
        "Invite an email address to a project with a role: the mail's link (on ARBITER_BASE_URL)"
        " lets its owner choose a password and join, once, for ARBITER_INVITATION_DAYS days."
    )

    def add_project_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--role", choices=Role.values, default=Role.ANNOTATOR)

    def handle_project(self, project, **options):
        try:
            invitation = invitation_create(
                project=project, email=options["email"], role=options["role"], invited_by=None
            )
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Invited {invitation.email} to {project.slug} as {invitation.role}; the link"
                f" works until {invitation.expires_at:%Y-%m-%d %H:%M} UTC"
            )
        )
