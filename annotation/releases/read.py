"""A built release read back from its files: ``jsonl/<split>.jsonl`` line by line, so a diff
or a CSV of a release of any size holds one row at a time and never parses Parquet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
JSONL_DIR = "jsonl"

ReleaseRow = dict[str, Any]
"""One pair of a release: the columns of docs/releases.md ("Data files") and its ``split``."""


def release_splits(folder: Path) -> list[str]:
    """The release's splits in the order the manifest (and the card) list them."""
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return list(manifest["splits"])


def release_rows(folder: Path) -> Iterator[ReleaseRow]:
    """Every row of the release in ``folder``, split by split, in file order (by id)."""
    for split in release_splits(folder):
        with open(folder / JSONL_DIR / f"{split}.jsonl", encoding="utf-8") as lines:
            for line in lines:
                row = json.loads(line)
                row["split"] = split
                yield row
