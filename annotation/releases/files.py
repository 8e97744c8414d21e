"""A built release's files for downloads and the release page: the manifest's list, and the
stored name of one file named in it (docs/releases.md, "Downloads"). Only names the manifest
lists are ever opened, so no crafted name (``../``, an absolute path, a link) reaches another
file."""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotation.core import storage
from annotation.core.errors import Conflict, NotFound
from annotation.models import Release
from annotation.releases.read import MANIFEST
from annotation.releases.stored import AREA, StoredReleaseFiles, file_name, is_stored

# Types a client can act on; anything else is a plain download.
_CONTENT_TYPES = {
    ".parquet": "application/vnd.apache.parquet",
    ".jsonl": "application/jsonl",
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".gz": "application/gzip",
}
HAS_FILES = (Release.Status.BUILT, Release.Status.PUBLISHED)


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release folder: its path inside the folder, size and sha256."""

    name: str
    size: int
    sha256: str


def content_type_for(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix in _CONTENT_TYPES:
        return _CONTENT_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def _require_files(release: Release) -> None:
    if release.status not in HAS_FILES:
        raise Conflict(f"Release {release.version} is {release.status}: it has no files yet.")


def release_manifest(release: Release) -> dict[str, Any]:
    """The release's ``manifest.json``, parsed. Conflict before it is built."""
    _require_files(release)
    return json.loads(StoredReleaseFiles(release).text(MANIFEST))


def release_files(release: Release) -> list[ReleaseFile]:
    """Every file of the release folder, the manifest itself first, then in path order."""
    manifest = release_manifest(release)
    size = storage.size(AREA, file_name(release, MANIFEST))
    files = [ReleaseFile(MANIFEST, size, release.manifest_sha256)]
    files += [
        ReleaseFile(name, entry["size"], entry["sha256"])
        for name, entry in sorted(manifest["files"].items())
    ]
    return files


def release_file(release: Release, name: str) -> tuple[str, ReleaseFile]:
    """The stored name (in the ``releases`` area) of the file ``name`` of the release and its
    manifest entry. NotFound for any name the manifest does not list, whatever it points at,
    or one no longer stored."""
    listed = {entry.name: entry for entry in release_files(release)}
    entry = listed.get(name)
    if entry is None or not is_stored(release, name):
        raise NotFound(f"Release {release.version} has no file {name!r}.")
    return file_name(release, name), entry
