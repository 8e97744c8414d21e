"""``import_pairs SLUG FILE [--media-root DIR]``: all or nothing, with a summary."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import CommandError
from django.db import InterfaceError, OperationalError

from annotation.imports.errors import ImportFailed
from annotation.imports.services import import_job_run_file
from annotation.management.progress import TerminalProgress
from annotation.management.projects import ProjectCommand


class Command(ProjectCommand):
    help = (
        'Import comparison pairs from a JSONL file or a JSON {"pairs": [...]} file '
        "(MMRB2's released files work as they are). All or nothing: on any bad line the "
        "errors are printed with their line numbers, the exit code is 1 and nothing is imported."
    )

    slug_help = "the project to import into"

    def add_project_arguments(self, parser):
        parser.add_argument("file", help="a .jsonl or .json file")
        parser.add_argument(
            "--media-root",
            help="folder that image paths are relative to (default: the file's folder)",
        )

    def handle_project(self, project, **options):
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        media_root = Path(options["media_root"]) if options["media_root"] else path.parent
        if not media_root.is_dir():
            raise CommandError(f"No such folder: {media_root}")
        progress = _TerminalProgress(self.stderr) if sys.stderr.isatty() else None
        try:
            summary = import_job_run_file(
                project=project, path=path, media_root=media_root, progress=progress
            )
        except ImportFailed as failure:
            if progress:
                progress.clear()
            for line in failure.lines():
                self.stderr.write(line)
            raise CommandError(
                f"Nothing was imported: {failure.total} "
                f"{'error' if failure.total == 1 else 'errors'} in {path.name}.",
                returncode=1,
            ) from None
        except (OperationalError, InterfaceError) as exc:
            # The import is one transaction, which the database rolled back with the session.
            if progress:
                progress.clear()
            cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CommandError(
                "The database connection was lost during the import; nothing was imported. "
                f"Run the command again once the database is reachable ({cause}).",
                returncode=1,
            ) from None
        if progress:
            progress.clear()
        self.stdout.write(self.style.SUCCESS(f"Imported {path.name} into {project.slug}"))
        for line in summary.describe():
            self.stdout.write(f"  {line}")


class _TerminalProgress(TerminalProgress):
    """The import's bar: bytes read, and pairs so far."""

    def __call__(self, bytes_done: int, bytes_total: int, pairs_read: int) -> None:
        self.draw(bytes_done, bytes_total, f"{pairs_read:,} pairs")
