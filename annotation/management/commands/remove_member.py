from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.management.errors import validation_message
from annotation.models import Membership
from annotation.projects.services import member_remove


class Command(BaseCommand):
    help = "Remove a user from a project (their votes stay); the last curator cannot be removed."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")

    def handle(self, *args, **options):
        slug, username = options["slug"], options["username"]
        membership = (
            Membership.objects.select_related("project", "user")
            .filter(project__slug=slug, user__username=username)
            .first()
        )
        if membership is None:
            raise CommandError(f"{username!r} is not a member of a project with slug {slug!r}")
        try:
            member_remove(membership=membership)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Removed {username} from {slug}"))
