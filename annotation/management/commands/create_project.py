from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.management.errors import validation_message
from annotation.models import ConsensusRule, Scale
from annotation.projects.services import project_create


class Command(BaseCommand):
    help = "Create a project."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--scale", choices=Scale.values, default=Scale.TERNARY)
        parser.add_argument("--overlap", type=int, default=3, help="votes per pair (k)")
        parser.add_argument(
            "--consensus", choices=ConsensusRule.values, default=ConsensusRule.MAJORITY
        )
        parser.add_argument(
            "--min-agree",
            type=int,
            default=None,
            help="votes on one side for a majority (default: more than half)",
        )
        parser.add_argument("--guidelines-file", help="Markdown file with annotator guidelines")
        parser.add_argument(
            "--allow-media-urls",
            action="store_true",
            help="let imports fetch images from public http(s) URLs",
        )

    def handle(self, *args, **options):
        guidelines = ""
        if options["guidelines_file"]:
            with open(options["guidelines_file"], encoding="utf-8") as fh:
                guidelines = fh.read()
        try:
            project = project_create(
                slug=options["slug"],
                name=options["name"],
                scale=options["scale"],
                overlap=options["overlap"],
                consensus_rule=options["consensus"],
                guidelines=guidelines,
                allow_media_urls=options["allow_media_urls"],
                min_agree=options["min_agree"],
            )
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Created project {project.slug} ({project.name})"))
