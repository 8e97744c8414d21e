"""Makes the served copy, rebuilt from the decoded content, of media imported before imports
rebuilt it: images and 3D models rebuilt, video and audio re-encoded (docs/operations.md,
"Served copies without metadata")."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from annotation.core.batches import in_batches
from annotation.media.services import MediaError, media_strip_metadata
from annotation.models import Media


class Command(BaseCommand):
    help = (
        "Rebuild the served copy of every image, 3D model, video and audio clip imported "
        "before served copies were rebuilt from their content (imports make it themselves; "
        "older video and audio are not served until then). Safe to run again and while the "
        "site runs. --all rebuilds every file's served copy."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--all",
            action="store_true",
            help="Rebuild the served copy of every file, not only of outdated ones.",
        )

    def handle(self, *args, **options):
        rebuilt = 0
        missing: list[str] = []
        refused: list[str] = []
        remake = options["all"]
        pending = Media.objects.order_by("pk")
        if not remake:
            pending = pending.filter(
                Q(strip_result__isnull=True) | ~Q(strip_result=Media.StripResult.REBUILT)
            )
        for media in in_batches(pending):
            try:
                media_strip_metadata(media=media, remake=True)
            except FileNotFoundError:
                missing.append(media.sha256)
                continue
            except MediaError as exc:
                refused.append(f"{media.sha256}: {exc}")
                continue
            rebuilt += 1
        self.stdout.write(f"Served copies rebuilt: {rebuilt}")
        if refused:
            self.stdout.write(
                f"{len(refused)} files cannot be rebuilt and are not served:\n  "
                + "\n  ".join(refused[:20])
            )
        if missing:
            raise CommandError(
                f"{len(missing)} media missing from storage, left as they were: "
                + ", ".join(missing[:20])
            )
