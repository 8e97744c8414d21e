"""``verify_release PATH``: a release folder or its .tar.gz against its manifest."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.releases.archive import verify_release_path


class Command(BaseCommand):
    help = (
        "Check a downloaded release (its folder or its .tar.gz) against its manifest.json: "
        "every file's size and sha256. Names each file that is missing, changed or not in "
        "the manifest; exit code 1 when any differs."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="a release folder or .tar.gz")
        parser.add_argument(
            "--manifest-sha256",
            help="the manifest hash the release page shows, to check the manifest itself",
        )

    def handle(self, *args, **options):
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"No such file or folder: {path}", returncode=1)
        problems = verify_release_path(path, manifest_sha256=options["manifest_sha256"])
        if problems:
            for problem in problems:
                self.stderr.write(problem)
            raise CommandError(
                f"{path.name} does not match its manifest: {len(problems)} "
                f"{'file differs' if len(problems) == 1 else 'files differ'}.",
                returncode=1,
            )
        self.stdout.write(self.style.SUCCESS(f"{path.name} matches its manifest."))
