"""Reads of releases: the rows of a built release, from its files (never the database, which
may have changed since)."""

from __future__ import annotations

from collections.abc import Iterator

from annotation.core.errors import Conflict
from annotation.models import (
    Release,
)
from annotation.releases import read
from annotation.releases.stored import StoredReleaseFiles


def release_rows(release: Release) -> Iterator[read.ReleaseRow]:
    """The rows of a built (or published) release, split by split in file order, read from
    its ``data/<split>.jsonl``: what the diff and the CSV read, never the database (which
    may have changed since). Conflict when it has not been built."""
    if release.status not in (Release.Status.BUILT, Release.Status.PUBLISHED):
        raise Conflict(f"Release {release.version} is {release.status}: it has no files yet.")
    return read.release_rows(StoredReleaseFiles(release))
