from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from annotation.media.services import media_strip_metadata
from annotation.models import Media


class Command(BaseCommand):
    help = (
        "Make the served copy without metadata of every image imported before served copies "
        "existed (imports make it themselves). Safe to run again and while the site runs. "
        "--all makes every image's served copy again, for copies an earlier version made."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--all",
            action="store_true",
            help="Make the served copy of every image again, not only of those without one.",
        )

    def handle(self, *args, **options):
        results: Counter[str] = Counter()
        missing: list[str] = []
        remake = options["all"]
        # Images only: a video's or audio clip's copy is re-encoded at import.
        pending = Media.objects.filter(kind=Media.Kind.IMAGE).order_by("pk")
        if not remake:
            pending = pending.filter(served_sha256__isnull=True)
        for media in pending.iterator():
            try:
                media_strip_metadata(media=media, remake=remake)
            except FileNotFoundError:
                missing.append(media.sha256)
                continue
            results[str(media.strip_result)] += 1
        summary = ", ".join(
            f"{results[choice.value]} {choice.value}" for choice in Media.StripResult
        )
        self.stdout.write(f"Served copies made: {summary}")
        if results[Media.StripResult.FAILED]:
            self.stdout.write(
                "Images marked failed keep serving their original bytes (see the warnings)."
            )
        if missing:
            raise CommandError(
                f"{len(missing)} media missing from storage, left as they were: "
                + ", ".join(missing[:20])
            )
