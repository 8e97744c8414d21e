"""A built release read back from its files: ``jsonl/<split>.jsonl`` line by line, so a diff
or a CSV of a release of any size holds one row at a time and never parses Parquet. The files
are read through a ``ReleaseFiles`` (``stored.StoredReleaseFiles``: local disk or the bucket)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

import orjson

MANIFEST = "manifest.json"
JSONL_DIR = "jsonl"
TIES_JSONL_DIR = f"{JSONL_DIR}/ties"

ReleaseRow = dict[str, Any]
"""One pair of a release: the columns of docs/releases.md ("Data files") and its ``split``."""


class ReleaseFiles(Protocol):
    """A release folder's files by their path in it."""

    def text(self, relative: str) -> str: ...

    def lines(self, relative: str) -> Iterator[str]: ...


def _manifest(folder: ReleaseFiles) -> dict[str, Any]:
    return json.loads(folder.text(MANIFEST))


def release_splits(folder: ReleaseFiles) -> list[str]:
    """The release's splits in the order the manifest (and the card) list them."""
    return list(_manifest(folder)["splits"])


# The files' ``preferred_side`` is the rows' ``label`` here (what the diff and the CSV call it).
_COLUMNS = {"preferred_side": "label"}
# A tie's columns (``ties/``) by the preference columns they stand for in ``release_rows``.
_TIE_COLUMNS = {
    **_COLUMNS,
    "response_a": "chosen",
    "response_b": "rejected",
    "response_a_images": "chosen_images",
    "response_b_images": "rejected_images",
    "model_a": "chosen_model",
    "model_b": "rejected_model",
}


def release_rows(folder: ReleaseFiles) -> Iterator[ReleaseRow]:
    """Every row of the release in ``folder``, split by split, in file order (by id): the
    preferences, then the ties, a tie's responses under the preference columns in imported
    order (A as ``chosen``) with ``label`` tie, for the diff and the CSV, which show the
    label. Trainers read the files, where ties have columns of their own."""
    manifest = _manifest(folder)
    for split in manifest["splits"]:
        for path, tie in (
            (f"{JSONL_DIR}/{split}.jsonl", False),
            (f"{TIES_JSONL_DIR}/{split}.jsonl", True),
        ):
            if path not in manifest["files"]:
                continue
            for line in folder.lines(path):
                row = orjson.loads(line)
                names = _TIE_COLUMNS if tie else _COLUMNS
                row = {names.get(name, name): value for name, value in row.items()}
                row["split"] = split
                yield row
