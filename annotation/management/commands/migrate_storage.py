"""``migrate_storage [--area AREA ...] [--dry-run] [--jobs N]`` (docs/operations.md, "Moving
files to the bucket")."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from annotation.core.storage import AREAS
from annotation.core.storage_migration import Outcome, storage_migrate
from annotation.management.progress import TerminalProgress


class Command(BaseCommand):
    help = (
        "Copy this deployment's files from its local folders (media, uploads, releases, "
        "checkpoints) to the bucket of ARBITER_STORAGE=s3, reading each object back to check "
        "its sha256. Objects already there with the right hash are skipped, so it can be run "
        "again to resume; objects with other bytes are copied again. Local files are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--area",
            action="append",
            choices=AREAS,
            help="only this area (repeat for several); default: all of them",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="check what is in the bucket and say what would be copied, copying nothing",
        )
        parser.add_argument("--jobs", type=int, default=8, help="files at once (default 8)")

    def handle(self, *args, **options):
        if options["jobs"] < 1:
            raise CommandError("--jobs must be at least 1")
        bar = TerminalProgress(self.stderr) if sys.stderr.isatty() else None
        try:
            summary = storage_migrate(
                areas=options["area"] or AREAS,
                dry_run=options["dry_run"],
                jobs=options["jobs"],
                progress=bar.draw if bar is not None else None,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if bar is not None:
                bar.clear()
        would = "would be " if summary.dry_run else ""
        counts = summary.counts
        self.stdout.write(f"Files checked: {summary.files}")
        self.stdout.write(f"  {would}copied: {counts[Outcome.COPIED]}")
        self.stdout.write(
            f"  {would}replaced (the object had other bytes): {counts[Outcome.REPLACED]}"
        )
        self.stdout.write(f"  already in the bucket with the right hash: {counts[Outcome.SKIPPED]}")
        self.stdout.write(f"  bytes {would}copied: {summary.bytes_copied:,}")
        for label in summary.replaced[:20]:
            self.stdout.write(f"  {would}replaced: {label}")
        if "releases" in (options["area"] or AREAS):
            from annotation.releases.stored_archive import published_archives_migrate

            made, failed = published_archives_migrate(dry_run=summary.dry_run)
            self.stdout.write(
                f"  published release archives {would}made in the bucket (their downloads "
                f"are presigned there): {len(made)}"
            )
            summary.failures.extend(failed)
        if summary.failures:
            raise CommandError(
                f"{len(summary.failures)} files failed (run again to retry):\n  "
                + "\n  ".join(summary.failures[:20])
            )
