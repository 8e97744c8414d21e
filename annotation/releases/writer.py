"""The files of a release as they are written: every file's sha256 and size taken on the way
(``HashingFile``), and each split's Parquet, JSONL and MMRB2 files written row group by row
group (``SplitFiles``), so a release of any size is never held whole in memory."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# Rows per Parquet row group (and per write of the text files): fixed, so the same rows give
# the same bytes; large enough for Parquet's compression and column statistics to pay.
ROW_GROUP_ROWS = 10_000
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
# Only Parquet under data/, so `load_dataset("parquet", data_dir="data")` finds nothing else.
DATA_DIR = "data"
JSONL_DIR = "jsonl"
MMRB2_DIR = "mmrb2"

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int


class HashingFile:
    """A binary file that hashes what is written to it; ``entry`` once closed."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "wb")  # noqa: SIM115 -- closed by close()
        self._hash = hashlib.sha256()
        self._size = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        self._size += len(data)
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()

    def tell(self) -> int:
        return self._size

    def close(self) -> None:
        if not self.closed:
            self._file.close()
            self.closed = True

    @property
    def entry(self) -> FileEntry:
        return FileEntry(self._hash.hexdigest(), self._size)


def _message_type(multimodal: bool) -> pa.DataType:
    if multimodal:
        part = pa.struct([("type", pa.string()), ("text", pa.string())])
        return pa.struct([("role", pa.string()), ("content", pa.list_(part))])
    return pa.struct([("role", pa.string()), ("content", pa.string())])


def row_schema(multimodal: bool) -> pa.Schema:
    """The data files' columns (docs/releases.md, "Data files"), in order."""
    messages = pa.list_(_message_type(multimodal))
    paths = pa.list_(pa.string())
    return pa.schema(
        [
            ("id", pa.string()),
            ("prompt", messages),
            ("chosen", messages),
            ("rejected", messages),
            ("images", paths),
            ("chosen_images", paths),
            ("rejected_images", paths),
            ("task", pa.string()),
            ("criterion", pa.string()),
            ("chosen_model", pa.string()),
            ("rejected_model", pa.string()),
            ("label", pa.string()),
            ("votes", pa.list_(pa.int64())),
            ("agreement", pa.float64()),
            ("source", pa.string()),
            ("ensemble_label", pa.string()),
            ("ensemble_agreement", pa.float64()),
            ("ensemble_summary", pa.string()),
        ]
    )


class SplitFiles:
    """One split's ``data/<split>.parquet``, ``jsonl/<split>.jsonl`` and ``mmrb2/<split>.json``,
    opened on the split's first row. ``arrow_bytes``: the rows' size in memory (the card's
    ``num_bytes``)."""

    def __init__(self, folder: Path, split: str, schema: pa.Schema):
        self.split = split
        self.schema = schema
        self.rows = 0
        self.arrow_bytes = 0
        self._parquet_file = HashingFile(folder / DATA_DIR / f"{split}.parquet")
        self._jsonl = HashingFile(folder / JSONL_DIR / f"{split}.jsonl")
        self._mmrb2 = HashingFile(folder / MMRB2_DIR / f"{split}.json")
        self._mmrb2.write(b'{"pairs": [\n')
        self._parquet = pq.ParquetWriter(
            self._parquet_file,
            schema,
            compression=PARQUET_COMPRESSION,
            compression_level=PARQUET_COMPRESSION_LEVEL,
            store_schema=True,
        )
        self._rows: list[dict[str, Any]] = []
        self._mmrb2_records: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any], mmrb2: dict[str, Any]) -> None:
        self._rows.append(row)
        self._mmrb2_records.append(mmrb2)
        if len(self._rows) >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        table = pa.Table.from_pylist(self._rows, schema=self.schema)
        self._parquet.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.arrow_bytes += table.nbytes
        self._jsonl.write("".join(_dumps(row) + "\n" for row in self._rows).encode())
        separator = ",\n" if self.rows else ""
        self._mmrb2.write(
            (separator + ",\n".join(_dumps(record) for record in self._mmrb2_records)).encode()
        )
        self.rows += len(self._rows)
        self._rows, self._mmrb2_records = [], []

    def close(self) -> dict[str, FileEntry]:
        """Writes what is left and closes the files; their entries by path in the release."""
        self._flush()
        self._parquet.close()
        self._parquet_file.close()
        self._jsonl.close()
        self._mmrb2.write(b"\n]}\n")
        self._mmrb2.close()
        return {
            f"{DATA_DIR}/{self.split}.parquet": self._parquet_file.entry,
            f"{JSONL_DIR}/{self.split}.jsonl": self._jsonl.entry,
            f"{MMRB2_DIR}/{self.split}.json": self._mmrb2.entry,
        }
