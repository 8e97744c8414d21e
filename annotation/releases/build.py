"""Building a release (docs/releases.md): the selected rows into each split's files, the
media, the card, the manifest, then the archive's skeleton and index, all in a temporary
folder that replaces the release's folder and skeleton at the end (on the bucket: uploaded
and verified), so no reader ever sees half a release."""

from __future__ import annotations

import gc
import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from annotation.core import seals, storage
from annotation.core.scratch import scratch_path
from annotation.media.copies import image_copy_outdated
from annotation.models import Media, PairStatus, Project, ProjectMedia, Release
from annotation.releases import rows as release_rows
from annotation.releases.archive import GZIP_THREADS, ArchiveParts, manifest_bytes
from annotation.releases.card import Statistics, render_card
from annotation.releases.formats import (
    AV_KINDS,
    MEDIA_DIRS,
    ReleasePair,
    mmrb2_record,
    table_rows,
)
from annotation.releases.framing import mapped_windows
from annotation.releases.omni import omni_record
from annotation.releases.read import MANIFEST
from annotation.releases.selection import Selection, check_selection
from annotation.releases.stored import AREA, index_name, release_store, skeleton_name
from annotation.releases.writer import FileEntry, HashingFile, SplitFiles, release_tables

Report = Callable[[int, int, str], None]
"""``report(rows_done, rows_total, stage)``."""

# A build's work folder, next to the release folders of its project: ``.build-<id>-<hex>``.
BUILD_FOLDER = ".build-{release_id}-{token}"
_BUILD_FOLDER = re.compile(r"\.build-(\d+)-[0-9a-f]{32}")


@dataclass(frozen=True)
class BuildOutcome:
    rows_total: int
    pair_count: int
    statistics: dict[str, Any]
    card: str
    manifest_sha256: str
    archive_size: int  # its sha256 is taken when the release is published


class _MediaFiles:
    """The release's media files: each media hash used is mapped to the path in the release
    of its served copy (made first if an image has none) or, with ``original``, of its
    original bytes, and each file is put in ``folder`` once, as soon as a chunk of rows
    names it, on ``placing``'s threads (hashed by ``checks`` while the build goes on)."""

    def __init__(
        self, *, original: bool, folder: Path, checks: HashChecks, placing: Executor
    ) -> None:
        self.files: dict[str, str] = {}  # media sha256 -> "images/<sha256 written>.<ext>"
        # Path in the release -> the name of its bytes in the storage's media area.
        self._sources: dict[str, str] = {}
        self._sizes: dict[str, int] = {}
        self._original = original
        self._folder = folder
        self._checks = checks
        self._placing = placing
        self._placed: dict[str, Future[FileEntry]] = {}

    def add_media(self, pairs: list[ReleasePair]) -> None:
        wanted = {
            part["media"]
            for pair in pairs
            for parts in (pair.prompt, pair.response_a.content, pair.response_b.content)
            for part in parts
            if part["type"] in MEDIA_DIRS
        } - set(self.files)
        if not wanted:
            return
        for media in Media.objects.filter(sha256__in=wanted):
            if self._original:
                sha256, relative, fmt = media.sha256, media.relative_path, media.format
            else:
                if image_copy_outdated(media):
                    # Imported only for a copy to make (again): the media module brings PyAV,
                    # its codecs and an HTTP client, a fifth of a second and more of a build
                    # whose copies are all made.
                    from annotation.media.services import media_strip_metadata

                    media_strip_metadata(media=media, remake=True)
                relative = media.served_relative_path  # raises when there is still none
                sha256 = media.served_sha256 or media.sha256
                fmt = media.served_format or media.format
            path = f"{MEDIA_DIRS[media.kind]}/{sha256}.{Media.EXTENSIONS[fmt]}"
            self.files[media.sha256] = path
            if path not in self._sources:
                self._sources[path] = relative
                self._placed[path] = self._placing.submit(self._place, path)
        if missing := wanted - set(self.files):
            raise FileNotFoundError(f"media {sorted(missing)[0]} is not in the database")

    def size(self, path: str) -> int:
        """The size of ``images/<name>`` (``videos/<name>``, ...) in bytes (the data files
        embed images)."""
        if path not in self._sizes:
            self._sizes[path] = storage.size("media", self._sources[path])
        return self._sizes[path]

    def read_bytes(self, path: str) -> bytes:
        return storage.read_bytes("media", self._sources[path])

    def count(self, kind: str) -> int:
        return sum(path.startswith(f"{MEDIA_DIRS[kind]}/") for path in self._sources)

    def placed(self, parts: ArchiveParts) -> dict[str, FileEntry]:
        """Every file's entry once it is in the folder, each added to ``parts`` as a stored
        member (the archive reads it from the folder)."""
        entries = {path: self._placed[path].result() for path in sorted(self._placed)}
        for path, entry in entries.items():
            parts.stored(path, entry.size)
        return entries

    def _place(self, path: str) -> FileEntry:
        """One file in the release folder, named by the sha256 of its bytes: on local disk a
        hard link to the stored file (media files are never rewritten: a new copy has a new
        name), hashed by ``checks`` while the build goes on unless it is sealed; else (a
        bucket, another file system) copied while hashed."""
        target, name = self._folder / path, self._sources[path]
        expected = PurePosixPath(path).stem
        target.parent.mkdir(parents=True, exist_ok=True)
        if not storage.is_s3():
            stored = storage.local_root("media") / storage.object_key("media", name)
            if stored.is_symlink():  # never made by Arbiter: a link could point anywhere
                raise ValueError(f"The stored media file {name} is a symbolic link.")
            try:
                os.link(stored, target, follow_symlinks=False)
            except OSError:  # another file system, or one without hard links
                pass
            else:
                # A file sealed when its bytes were hashed as they were written, unchanged
                # since, is not read again (docs/releases.md, "Sealed media files").
                if not seals.is_sealed(target, expected):
                    self._checks.submit(target, name, expected)
                return FileEntry(expected, target.stat().st_size)
        out = HashingFile(target)
        source = storage.open_stream("media", name)
        try:
            for block in source:
                out.write(block)
        finally:
            source.close()
            out.close()
        check_media_hash(name, expected, out.entry.sha256)
        return out.entry


def check_media_hash(name: str, expected: str, found: str) -> None:
    if found != expected:
        raise ValueError(
            f"The stored media file {name} does not hold the bytes it is named by (its sha256 "
            f"is {found}): the media storage is damaged. Restore the file from a backup as a "
            "new file renamed into place (releases share the stored files' bytes: "
            'docs/operations.md, "Media files and releases"), or import it again.'
        )


class HashChecks:
    """Media files hashed on threads of their own while the build goes on (the rows and the
    card are written meanwhile); ``wait`` raises for the first whose bytes are not those its
    name says, before the release is stored."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=GZIP_THREADS, thread_name_prefix="release-hash")
        self._pending: list[Future] = []

    def __enter__(self) -> HashChecks:
        return self

    def __exit__(self, *exc_info) -> None:
        self._pool.shutdown(cancel_futures=True)

    def submit(self, path: Path, name: str, expected: str) -> None:
        self._pending.append(self._pool.submit(self._check, path, name, expected))

    @staticmethod
    def _check(path: Path, name: str, expected: str) -> None:
        # Hashed from the file's own pages (hashlib lets go of the GIL for each window).
        digest = hashlib.sha256()
        for window in mapped_windows(path):
            digest.update(window)
        check_media_hash(name, expected, digest.hexdigest())

    def wait(self) -> None:
        for pending in self._pending:
            pending.result()


def _av_kinds(project: Project) -> tuple[str, ...]:
    """The kinds beyond images among the project's media, whose columns its releases have."""
    kinds = set(
        Media.objects.filter(
            sha256__in=ProjectMedia.objects.filter(project=project).values("media_id")
        )
        .values_list("kind", flat=True)
        .distinct()
    )
    return tuple(kind for kind in AV_KINDS if kind in kinds)


def _ensemble_removed(release: Release, selection: Selection) -> int:
    easy = release.project.pairs.filter(status=PairStatus.EASY, is_gold=False)
    if selection.tasks:
        easy = easy.filter(task__in=selection.tasks)
    if selection.criteria:
        easy = easy.filter(criterion__in=selection.criteria)
    return easy.count()


def write_release(
    *,
    release: Release,
    selection: Selection,
    folder: Path,
    parts: ArchiveParts,
    checks: HashChecks,
    report: Report,
) -> tuple[int, dict[str, Any], str, dict[str, FileEntry]]:
    """Writes the release's files into ``folder``, each one's archive member into ``parts``
    (the media files' hashes checked by ``checks``); returns the rows read, the statistics,
    the card and every file's entry (the manifest included)."""

    def open_file(relative: str) -> HashingFile:
        return HashingFile(folder / relative, tee=parts.part(relative))

    project = release.project
    multimodal = ProjectMedia.objects.filter(project=project).exists()
    av_kinds = _av_kinds(project) if multimodal else ()
    tables = release_tables(multimodal, av_kinds)
    total = release_rows.pairs_total(project, selection)
    report(0, total, "reading")
    statistics = Statistics(scale=project.scale)
    writers: dict[str, SplitFiles] = {}
    done = 0
    entries: dict[str, FileEntry] = {}
    # One thread writes the Parquet row groups (and their JSON lines) while this one reads
    # and encodes the next rows (``TableFiles``); the media files are put in the folder on
    # threads of their own meanwhile.
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="release-parquet") as flusher,
        ThreadPoolExecutor(max_workers=GZIP_THREADS, thread_name_prefix="release-media") as placing,
    ):
        media_files = _MediaFiles(
            original=selection.original_media, folder=folder, checks=checks, placing=placing
        )
        for read, chunk in release_rows.release_pairs(project, selection):
            if multimodal:
                media_files.add_media([pair for _, pair in chunk])
            for split, pair in chunk:
                if split not in writers:
                    writers[split] = SplitFiles(open_file, split, tables, media_files, flusher)
                omni = omni_record(pair, files=media_files.files)
                writers[split].add(
                    table_rows(
                        pair, files=media_files.files, multimodal=multimodal, av_kinds=av_kinds
                    ),
                    mmrb2_record(pair, files=media_files.files),
                    None if omni is None else (pair.task, omni),
                )
                statistics.add(pair, split)
            done += read
            report(min(done, total), total, "reading")
        for split in sorted(writers):
            entries |= writers[split].close()
        done = total  # pairs imported meanwhile are not in the count
        report(done, total, "images")
        entries |= media_files.placed(parts)
    report(done, total, "card")
    split_order = [name for name in selection.split_names if name in writers]
    figures = statistics.as_json(
        split_order=split_order,
        configs={
            config: {
                name: [writers[name].rows_of(config), writers[name].bytes_of(config)]
                for name in split_order
                if writers[name].rows_of(config)
            }
            for config in tables
        },
        media={kind: media_files.count(kind) for kind in ("image", *av_kinds)},
        ensemble_removed=_ensemble_removed(release, selection),
        omni_files=sum(writer.omni_files for writer in writers.values()),
    )
    card = render_card(
        project=project,
        selection=selection,
        statistics=figures,
        tables=tables,
        multimodal=multimodal,
        av_kinds=av_kinds,
    )
    entries["README.md"] = _write(open_file("README.md"), card.encode())
    manifest = manifest_bytes(project_slug=project.slug, splits=split_order, files=entries)
    entries[MANIFEST] = _write(open_file(MANIFEST), manifest)
    return total, figures, card, entries


def _write(out: HashingFile, data: bytes) -> FileEntry:
    try:
        out.write(data)
    finally:
        out.close()
    return out.entry


def _replace(source: Path, target: Path) -> None:
    """Moves ``source`` onto ``target`` (a folder or a file), the old one removed."""
    if target.is_dir():
        old = target.with_name(f".old-{target.name}-{uuid.uuid4().hex}")
        os.replace(target, old)
        os.replace(source, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(source, target)


def build_folders(root: Path) -> dict[Path, int]:
    """The builds' work folders under ``root`` (ARBITER_RELEASE_ROOT), with their release's
    id: a build removes its own at the end, so those of builds no longer running were left
    by a killed one."""
    found: dict[Path, int] = {}
    homes = [home for home in root.iterdir() if home.is_dir()] if root.is_dir() else []
    for home in homes:
        for folder in home.iterdir():
            if (match := _BUILD_FOLDER.fullmatch(folder.name)) and folder.is_dir():
                found[folder] = int(match.group(1))
    return found


def remove_build_folders(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def build_release(*, release: Release, report: Report) -> BuildOutcome:
    """Builds ``release`` (not published: the caller moved it to building) in a work folder,
    then stores its folder and its archive's skeleton and index: on local disk moved into
    place under ARBITER_RELEASE_ROOT, in the bucket uploaded and read back
    (``stored.release_store``). A work folder an earlier, killed build of this release left on
    disk is removed first: the caller holds the build."""
    selection = check_selection(release.selection)
    work = _work_folder(release)
    folder, skeleton = work / "release", work / "release.skeleton"
    collecting = gc.isenabled()
    try:
        folder.mkdir(parents=True)
        with (
            ArchiveParts(work / "parts", root=release.project.slug) as parts,
            HashChecks() as checks,
        ):
            # The rows are acyclic dicts and lists, freed by reference counting; with the
            # cyclic collector on, its full passes over the millions of objects a chunk
            # makes took a third of the build's time.
            gc.disable()
            total, figures, card, entries = write_release(
                release=release,
                selection=selection,
                folder=folder,
                parts=parts,
                checks=checks,
                report=report,
            )
            if collecting:
                gc.enable()
            report(total, total, "archive")
            index, skeleton_entry = parts.frame(skeleton)
            checks.wait()
        if storage.is_s3():
            report(total, total, "storing")
            release_store(
                release=release,
                folder=folder,
                skeleton=skeleton,
                skeleton_sha256=skeleton_entry.sha256,
                index=index.to_bytes(),
                manifest_sha256=entries[MANIFEST].sha256,
            )
        else:
            _replace(folder, release.folder)
            root = storage.local_root(AREA)
            os.replace(skeleton, root / skeleton_name(release))
            storage.put_bytes(AREA, index_name(release), index.to_bytes())
            # An archive an earlier build wrote whole: the release's archive is made from
            # the index now.
            release.archive_path.unlink(missing_ok=True)
    finally:
        if collecting:
            gc.enable()
        shutil.rmtree(work, ignore_errors=True)
    return BuildOutcome(
        rows_total=total,
        pair_count=figures["pairs"],
        statistics=figures,
        card=card,
        manifest_sha256=entries[MANIFEST].sha256,
        archive_size=index.size,
    )


def _work_folder(release: Release) -> Path:
    """The build's work folder: beside the release folders on local disk (so the finished
    folder is moved into place), in the system's temporary folder when the release goes to
    the bucket (swept when a worker starts: core/scratch.py)."""
    if storage.is_s3():
        return scratch_path("release")
    home = release.folder.parent
    home.mkdir(parents=True, exist_ok=True)
    remove_build_folders(
        [folder for folder, pk in build_folders(home.parent).items() if pk == release.pk]
    )
    return home / BUILD_FOLDER.format(release_id=release.pk, token=uuid.uuid4().hex)
