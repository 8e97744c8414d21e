"""``create_release SLUG --version X.Y.Z [--out DIR] [selection flags] [--publish]``
(docs/releases.md, "Command line")."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import CommandError

from annotation.core.errors import DomainError
from annotation.management.progress import TerminalProgress
from annotation.management.projects import ProjectCommand
from annotation.releases.files import release_manifest
from annotation.releases.selection import DEFAULT_SPLITS
from annotation.releases.services import release_build, release_create, release_publish
from annotation.releases.stored import file_name, location, release_copy_out
from annotation.releases.stored_archive import archive_write_out

_STAGES = {"reading": "pairs", "images": "images", "card": "card", "archive": "archive"}


class Command(ProjectCommand):
    help = (
        "Build a release of a project's decided pairs: Parquet and JSONL per split (TRL-ready "
        "prompt/chosen/rejected with provenance), MMRB2- and Omni-RewardBench-compatible files, "
        "media by hash, a "
        "dataset card, a manifest and one deterministic .tar.gz (docs/releases.md)."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # DESIGN's contract names the release's version --version: it replaces Django's
        # option of that name (which prints Django's version).
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_project_arguments(self, parser):
        parser.add_argument("--version", required=True, help="X.Y.Z, new in the project")
        parser.add_argument("--out", help="also copy the folder and the .tar.gz into DIR")
        parser.add_argument(
            "--splits",
            default=",".join(f"{name}={ratio:g}" for name, ratio in DEFAULT_SPLITS),
            help="name=ratio,... adding up to 1, split by prompt (default test=1)",
        )
        parser.add_argument("--seed", type=int, default=0, help="seed of the split (default 0)")
        parser.add_argument("--tasks", default="", help="only these tasks: a,b")
        parser.add_argument(
            "--criterion",
            action="append",
            default=[],
            help="only pairs with this criterion (repeat for more)",
        )
        parser.add_argument(
            "--min-agreement", help="only pairs whose votes agree with the label this much (0-1)"
        )
        parser.add_argument("--ties", action="store_true", help="include pairs labelled tie")
        parser.add_argument(
            "--ensemble", action="store_true", help="include pairs the judge ensemble found easy"
        )
        parser.add_argument(
            "--no-consensus", action="store_true", help="leave out pairs decided by the rule"
        )
        parser.add_argument(
            "--no-adjudicated", action="store_true", help="leave out adjudicated pairs"
        )
        parser.add_argument(
            "--reference-labels",
            action="store_true",
            help="label pairs by their imported reference label (chosen, criteria_preference) "
            "instead of Arbiter's consensus",
        )
        parser.add_argument(
            "--original-media",
            action="store_true",
            help="the media files as imported, metadata kept (default: the stripped copies)",
        )
        parser.add_argument("--publish", action="store_true", help="publish it once built")

    def handle_project(self, project, **options):
        out = Path(options["out"]) if options["out"] else None
        if out is not None and out.exists() and not out.is_dir():
            raise CommandError(f"--out: {out} is not a folder")
        selection = {
            "splits": options["splits"],
            "seed": options["seed"],
            "tasks": options["tasks"],
            "criteria": options["criterion"],
            "min_agreement": options["min_agreement"],
            "include_ties": options["ties"],
            "include_ensemble": options["ensemble"],
            "include_consensus": not options["no_consensus"],
            "include_adjudicated": not options["no_adjudicated"],
        }
        if options["reference_labels"]:
            selection["reference_labels"] = True
        if options["original_media"]:
            selection["original_media"] = True
        bar = TerminalProgress(self.stderr) if sys.stderr.isatty() else None

        def progress(done: int, total: int, stage: str) -> None:
            if bar is not None:
                bar.draw(done, total, f"{done:,}/{total:,} {_STAGES.get(stage, stage)}")

        try:
            release = release_create(
                project=project, version=options["version"], selection=selection, user=None
            )
            release = release_build(release=release, progress=progress)
            if options["publish"]:
                release = release_publish(release=release, user=None)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if bar is not None:
                bar.clear()
        self._summary(release, out)

    def _summary(self, release, out: Path | None) -> None:
        write = self.stdout.write
        stats = release.statistics
        write(
            self.style.SUCCESS(
                f"Release {release} {release.status}: {release.pair_count} pairs"
                f" ({', '.join(f'{n} {name}' for name, n in stats['splits'].items()) or 'none'})"
            )
        )
        alpha = stats["alpha_side"]
        write(
            f"  agreement: alpha (sides) {'n/a' if alpha is None else f'{alpha:.3f}'} from "
            f"{stats['annotators']} annotators; {stats['images']} images; "
            f"{stats['ensemble_removed']} pairs removed as easy by the judge ensemble"
        )
        write(f"  folder:   {location(file_name(release, ''))}")
        sha = release.archive_sha256 or "taken when it is published"
        write(
            f"  archive:  {release.archive_name} ({release.archive_size:,} bytes, made from the"
            f" folder as it is read; sha256 {sha})"
        )
        write(f"  manifest: sha256 {release.manifest_sha256}")
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            folder = out / f"{release.project.slug}-{release.version}"
            if folder.exists():
                raise CommandError(f"--out: {folder} exists already; the release is built")
            release_copy_out(release, folder, release_manifest(release))
            archive_write_out(release, out / release.archive_name)
            write(f"  copied to {folder} and {out / release.archive_name}")
