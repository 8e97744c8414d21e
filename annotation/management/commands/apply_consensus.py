from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.agreement.consensus import consensus_reapply
from annotation.models import Project


class Command(BaseCommand):
    help = (
        "Re-apply the project's current consensus rule to every decided pair (and to imported"
        " pairs with prior annotations, for re-analysis), printing what changes. Changes no"
        " vote; adjudicated pairs keep their label."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would change, change nothing"
        )

    def handle(self, *args, **options):
        project = Project.objects.filter(slug=options["slug"]).first()
        if project is None:
            raise CommandError(f"slug: no project {options['slug']!r}")
        result = consensus_reapply(project=project, dry_run=options["dry_run"])
        for change in result.changes:
            self.stdout.write(str(change))
        self.stdout.write(self.style.SUCCESS(result.summary()))
