from __future__ import annotations

from django.core.management.base import BaseCommand

from annotation.agreement.consensus import consensus_reapply
from annotation.management.projects import command_project


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
        project = command_project(options["slug"], refusal="slug: no project {slug!r}")
        result = consensus_reapply(project=project, dry_run=options["dry_run"])
        for change in result.changes:
            self.stdout.write(str(change))
        self.stdout.write(self.style.SUCCESS(result.summary()))
