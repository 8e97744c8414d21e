"""Files to upload (a dataset written as JSON Lines, a media folder as a zip) and a release's
files downloaded with their hashes checked."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arbiter_client.errors import IntegrityError

CHUNK_BYTES = 1 << 20


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: Path) -> int:
    """Writes each row (a pair in the import format) as one JSON line; the number written."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(dict(row), ensure_ascii=False) + "\n")
            count += 1
    return count


def zip_folder(folder: Path, path: Path) -> Path:
    """Every file under ``folder`` in a zip, by its path relative to it (the import's media
    root)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(folder).as_posix())
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def check_file(path: Path, *, size: int, sha256: str) -> None:
    """``IntegrityError`` naming the file when its size or sha256 is not the listed one."""
    actual_size = path.stat().st_size
    if actual_size != size:
        raise IntegrityError(f"{path}: {actual_size} bytes, the release lists {size}")
    actual = sha256_of(path)
    if actual != sha256:
        raise IntegrityError(f"{path}: sha256 {actual}, the release lists {sha256}")


def safe_destination(folder: Path, name: str) -> Path:
    """Where a file the server names goes under ``folder``; a name leading out is refused."""
    destination = (folder / name).resolve()
    if not destination.is_relative_to(folder.resolve()):
        raise IntegrityError(f"The release names a file outside its folder: {name!r}")
    return destination
