from __future__ import annotations

from annotation.decisions.services import consensus_reapply
from annotation.management.projects import ProjectCommand


class Command(ProjectCommand):
    help = (
        "Re-apply the project's current consensus rule to every decided pair (and to imported"
        " pairs with prior annotations, for re-analysis), printing what changes. Changes no"
        " vote; adjudicated pairs keep their label."
    )

    refusal = "slug: no project {slug!r}"

    def add_project_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would change, change nothing"
        )

    def handle_project(self, project, **options):
        result = consensus_reapply(project=project, dry_run=options["dry_run"])
        for change in result.changes:
            self.stdout.write(str(change))
        self.stdout.write(self.style.SUCCESS(result.summary()))
