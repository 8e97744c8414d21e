"""A built release read back from its files: ``jsonl/<split>.jsonl`` line by line, so a diff
or a CSV of a release of any size holds one row at a time and never parses Parquet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

MANIFEST = "manifest.json"
JSONL_DIR = "jsonl"
TIES_JSONL_DIR = f"{JSONL_DIR}/ties"

ReleaseRow = dict[str, Any]
"""One pair of a release: the columns of docs/releases.md ("Data files") and its ``split``."""


def _manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def release_splits(folder: Path) -> list[str]:
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


def release_rows(folder: Path) -> Iterator[ReleaseRow]:
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
            with open(folder / path, encoding="utf-8") as lines:
                for line in lines:
                    row = orjson.loads(line)
                    names = _TIE_COLUMNS if tie else _COLUMNS
                    row = {names.get(name, name): value for name, value in row.items()}
                    row["split"] = split
                    yield row
