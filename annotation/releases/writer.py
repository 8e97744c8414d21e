"""The files of a release as they are written: every file's sha256 and size taken on the way
(``HashingFile``), and each split's Parquet, JSONL and MMRB2 files written row group by row
group (``SplitFiles``), so a release of any size is never held whole in memory."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from annotation.releases.read import JSONL_DIR

# Rows per Parquet row group (and per write of the text files): fixed, so the same rows give
# the same bytes; large enough for Parquet's compression and column statistics to pay.
ROW_GROUP_ROWS = 5_000
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
# Only Parquet under data/, so `load_dataset("parquet", data_dir="data")` finds nothing else.
# Columns with few distinct values, dictionary-encoded; on the others (ids, texts, all
# different) Parquet's dictionary is built only to be given up.
DICTIONARY_COLUMNS = (
    "task",
    "criterion",
    "chosen_model",
    "rejected_model",
    "label",
    "source",
    "ensemble_label",
)
DATA_DIR = "data"
MMRB2_DIR = "mmrb2"


@dataclass(frozen=True)
class FileEntry:
    sha256: str
    size: int


class Tee(Protocol):
    def write(self, data: bytes, /) -> int: ...
    def close(self) -> None: ...


class HashingFile:
    """A binary file that hashes what is written to it (``entry`` once closed), and passes
    it on to ``tee`` (the file's part of the archive) as well."""

    def __init__(self, path: Path, *, tee: Tee | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "wb")  # noqa: SIM115 -- closed by close()
        self._hash = hashlib.sha256()
        self._size = 0
        self._tee = tee
        self.closed = False

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        self._size += len(data)
        if self._tee is not None:
            self._tee.write(data)
        return self._file.write(data)

    def flush(self) -> None:
        self._file.flush()

    def tell(self) -> int:
        return self._size

    def close(self) -> None:
        if not self.closed:
            self._file.close()
            if self._tee is not None:
                self._tee.close()
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
            ("prior_ratings", pa.string()),
        ]
    )


class SplitFiles:
    """One split's ``data/<split>.parquet``, ``jsonl/<split>.jsonl`` and ``mmrb2/<split>.json``,
    opened on the split's first row. ``arrow_bytes``: the rows' size in memory (the card's
    ``num_bytes``)."""

    def __init__(self, open_file: Callable[[str], HashingFile], split: str, schema: pa.Schema):
        self.split = split
        self.schema = schema
        self.rows = 0
        self.arrow_bytes = 0
        self._parquet_file = open_file(f"{DATA_DIR}/{split}.parquet")
        self._jsonl = open_file(f"{JSONL_DIR}/{split}.jsonl")
        self._mmrb2 = open_file(f"{MMRB2_DIR}/{split}.json")
        self._mmrb2.write(b'{"pairs": [\n')
        self._parquet = pq.ParquetWriter(
            self._parquet_file,
            schema,
            compression=PARQUET_COMPRESSION,
            compression_level=PARQUET_COMPRESSION_LEVEL,
            use_dictionary=list(DICTIONARY_COLUMNS),
            store_schema=True,
        )
        # Rows are kept encoded until their row group is written, appended to one buffer:
        # each bytes object orjson returns holds a block of several KiB however short it is.
        self._lines = bytearray()
        self._mmrb2_lines = bytearray()
        self._pending = 0

    def add(self, row: dict[str, Any], mmrb2: dict[str, Any]) -> None:
        self._lines += orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
        if self.rows or self._pending:
            self._mmrb2_lines += b",\n"
        self._mmrb2_lines += orjson.dumps(mmrb2)
        self._pending += 1
        if self._pending >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        self._jsonl.write(self._lines)
        # The Parquet rows are the JSON lines parsed back by Arrow's reader against the schema:
        # the two files cannot disagree, and it is several times faster than from_pylist.
        table = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(self._lines)),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=len(self._lines) + 1),
            parse_options=pa_json.ParseOptions(
                explicit_schema=self.schema, unexpected_field_behavior="error"
            ),
        )
        self._parquet.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.arrow_bytes += table.nbytes
        del table
        self._mmrb2.write(self._mmrb2_lines)
        self.rows += self._pending
        self._lines, self._mmrb2_lines, self._pending = bytearray(), bytearray(), 0

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
