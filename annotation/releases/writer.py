"""The files of a release as they are written: every file's sha256 and size taken on the way
(``HashingFile``), and each split's Parquet, JSONL and MMRB2 files written row group by row
group (``SplitFiles``), so a release of any size is never held whole in memory."""

from __future__ import annotations

import array
import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from annotation.releases.formats import (
    DEFAULT_CONFIG,
    IMAGE_PREFERENCE_CONFIG,
    MEDIA_COLUMNS,
    TIES_CONFIG,
)
from annotation.releases.omni import omni_file
from annotation.releases.read import JSONL_DIR, TIES_JSONL_DIR

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
    "preferred_side",
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


# An image in Parquet as ``datasets.Image`` stores it: its bytes, and its path in the release.
# Video, audio and 3D columns hold paths in the release folder, as JSONL does: each file is
# written once there, by its hash, however many rows show it (embedded, a clip shown in N
# pairs was N copies in Parquet, and a release several times its media's size), and they
# declare no ``datasets.Video`` or ``datasets.Audio`` feature, which decode with torchcodec
# (FFmpeg's shared libraries): PyAV opens the file (docs/releases.md, "Video, audio and 3D").
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
# The kinds of media whose bytes Parquet embeds.
EMBEDDED_KINDS = ("image",)
IMAGE_LIST = "list"
IMAGE_ONE = "one"
# A row group of a table with images holds at most this many image bytes (and at most
# ROW_GROUP_ROWS rows): a build holds one group, and readers fetch one at a time.
IMAGE_ROW_GROUP_BYTES = 64 * 1024 * 1024
TIES_DIR = TIES_CONFIG
IMAGE_PREFERENCE_DIR = IMAGE_PREFERENCE_CONFIG

_ENSEMBLE_COLUMNS = [
    # Not "label": TRL reads a "label" beside prompt/chosen/rejected as another format and
    # refuses the row (trl.data_utils.apply_chat_template).
    ("preferred_side", pa.string()),
    ("votes", pa.list_(pa.int64())),
    ("agreement", pa.float64()),
    ("source", pa.string()),
    ("ensemble_label", pa.string()),
    ("ensemble_agreement", pa.float64()),
    ("ensemble_summary", pa.string()),
    ("prior_ratings", pa.string()),
]


@dataclass(frozen=True)
class Table:
    """One kind of row file: its columns as the JSON lines hold them (``json_schema``, media
    as paths) and as Parquet holds them (``schema``, images as structs with their bytes and
    path, declared ``datasets.Image`` in the schema's ``huggingface`` metadata; video, audio
    and 3D models as paths)."""

    config: str
    parquet_dir: str
    jsonl_dir: str
    json_schema: pa.Schema
    images: dict[str, str]  # column -> IMAGE_LIST or IMAGE_ONE: the files embedded in Parquet

    @property
    def schema(self) -> pa.Schema:
        if not self.images:
            return self.json_schema
        fields = [
            pa.field(
                field.name,
                {IMAGE_LIST: pa.list_(IMAGE_TYPE), IMAGE_ONE: IMAGE_TYPE}[self.images[field.name]],
            )
            if field.name in self.images
            else field
            for field in self.json_schema
        ]
        # Only the images' features: ``datasets`` reads the other columns' from their Arrow
        # types.
        features = {
            name: (
                {"_type": "Sequence", "feature": {"_type": "Image"}}
                if self.images[name] == IMAGE_LIST
                else {"_type": "Image"}
            )
            for name in self.image_columns
        }
        metadata = {b"huggingface": orjson.dumps({"info": {"features": features}})}
        return pa.schema(fields, metadata=metadata)

    @property
    def image_columns(self) -> list[str]:
        """The embedded columns, declared ``datasets.Image``."""
        return list(self.images)

    @property
    def dictionary_columns(self) -> list[str]:
        return [name for name in DICTIONARY_COLUMNS if name in self.json_schema.names]


def _media_fields(prefixes: tuple[str, str], av_kinds: Sequence[str]) -> list[tuple[str, Any]]:
    """The media columns of a row, as ``formats._add_media`` fills them: for the images, then
    each other kind the release has, the prompt's files and each response's."""
    paths = pa.list_(pa.string())
    return [
        (f"{prefix}{MEDIA_COLUMNS[kind]}", paths)
        for kind in ("image", *av_kinds)
        for prefix in ("", *prefixes)
    ]


def _embedded(multimodal: bool, schema: pa.Schema, prefixes: tuple[str, str]) -> dict[str, str]:
    """The columns whose files Parquet embeds: the images'."""
    if not multimodal:
        return {}
    names = {
        f"{prefix}{MEDIA_COLUMNS[kind]}" for kind in EMBEDDED_KINDS for prefix in ("", *prefixes)
    }
    return {name: IMAGE_LIST for name in schema.names if name in names}


def row_schema(multimodal: bool, av_kinds: Sequence[str] = ()) -> pa.Schema:
    """The data files' columns (docs/releases.md, "Data files"), in order."""
    messages = pa.list_(_message_type(multimodal))
    return pa.schema(
        [
            ("id", pa.string()),
            ("prompt", messages),
            ("chosen", messages),
            ("rejected", messages),
            *_media_fields(("chosen_", "rejected_"), av_kinds),
            ("task", pa.string()),
            ("criterion", pa.string()),
            ("chosen_model", pa.string()),
            ("rejected_model", pa.string()),
            *_ENSEMBLE_COLUMNS,
        ]
    )


def preference_table(multimodal: bool, av_kinds: Sequence[str] = ()) -> Table:
    schema = row_schema(multimodal, av_kinds)
    images = _embedded(multimodal, schema, ("chosen_", "rejected_"))
    return Table(DEFAULT_CONFIG, DATA_DIR, JSONL_DIR, schema, images)


def tie_table(multimodal: bool, av_kinds: Sequence[str] = ()) -> Table:
    """Ties: both responses by their imported side, no chosen or rejected."""
    messages = pa.list_(_message_type(multimodal))
    prefixes = ("response_a_", "response_b_")
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("prompt", messages),
            ("response_a", messages),
            ("response_b", messages),
            *_media_fields(prefixes, av_kinds),
            ("task", pa.string()),
            ("criterion", pa.string()),
            ("model_a", pa.string()),
            ("model_b", pa.string()),
            *_ENSEMBLE_COLUMNS,
        ]
    )
    images = _embedded(multimodal, schema, prefixes)
    return Table(TIES_CONFIG, TIES_DIR, TIES_JSONL_DIR, schema, images)


def image_preference_table() -> Table:
    """Image-output pairs as image-preference trainers read them (Pick-a-Pic's columns)."""
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("caption", pa.string()),
            ("input_images", pa.list_(pa.string())),
            ("jpg_0", pa.string()),
            ("jpg_1", pa.string()),
            ("label_0", pa.float64()),
            ("label_1", pa.float64()),
            ("task", pa.string()),
            ("criterion", pa.string()),
            ("model_0", pa.string()),
            ("model_1", pa.string()),
            ("agreement", pa.float64()),
            ("source", pa.string()),
        ]
    )
    images = {"input_images": IMAGE_LIST, "jpg_0": IMAGE_ONE, "jpg_1": IMAGE_ONE}
    return Table(
        IMAGE_PREFERENCE_CONFIG,
        IMAGE_PREFERENCE_DIR,
        f"{JSONL_DIR}/{IMAGE_PREFERENCE_DIR}",
        schema,
        images,
    )


def _binary_array(values: list[bytes]) -> pa.Array:
    """``values`` as an Arrow binary array made from its buffers: ``pa.array`` of a list
    imports pandas to ask whether the list is one of its arrays (a third of a second and
    more of a media release's build). A row group's images stay far under binary's 2 GiB."""
    offsets = array.array("i", [0, *itertools.accumulate(map(len, values))])
    data = pa.py_buffer(b"".join(values))
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), data])


class ImageSource(Protocol):
    """The bytes of a media file, by its path in the release (``images/<name>``,
    ``videos/<name>``, ...), wherever storage keeps them."""

    def size(self, path: str) -> int: ...

    def read_bytes(self, path: str) -> bytes: ...


class TableFiles:
    """One table's ``<parquet_dir>/<split>.parquet`` and ``<jsonl_dir>/<split>.jsonl``, written
    row group by row group. ``arrow_bytes``: the rows' size in memory (the card's
    ``num_bytes``).

    With ``flusher`` (an executor of one thread), each row group is written there while the
    caller encodes the next: Arrow parses and compresses without the GIL, so the group's
    Parquet costs the build's main thread little. At most one group of this table is in
    flight (the next waits for it), and the groups of a file are written in order."""

    def __init__(
        self,
        open_file: Callable[[str], HashingFile],
        table: Table,
        split: str,
        image_source: ImageSource | None = None,
        flusher: Executor | None = None,
    ):
        self._flusher = flusher
        self._in_flight: Future | None = None
        self.table = table
        self.split = split
        self.rows = 0
        self.arrow_bytes = 0
        self._image_source = image_source
        self._schema = table.schema
        self._parquet_path = f"{table.parquet_dir}/{split}.parquet"
        self._jsonl_path = f"{table.jsonl_dir}/{split}.jsonl"
        self._parquet_file = open_file(self._parquet_path)
        self._jsonl = open_file(self._jsonl_path)
        self._parquet = pq.ParquetWriter(
            self._parquet_file,
            self._schema,
            compression=PARQUET_COMPRESSION,
            compression_level=PARQUET_COMPRESSION_LEVEL,
            use_dictionary=table.dictionary_columns,
            store_schema=True,
        )
        # Rows are kept encoded until their row group is written, appended to one buffer:
        # each bytes object orjson returns holds a block of several KiB however short it is.
        self._lines = bytearray()
        self._pending = 0
        self._pending_image_bytes = 0

    def add(self, row: dict[str, Any]) -> None:
        self._lines += orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
        self._pending += 1
        for column, kind in self.table.images.items():
            for path in row[column] if kind == IMAGE_LIST else [row[column]]:
                self._pending_image_bytes += self._source().size(path)
        if self._pending >= ROW_GROUP_ROWS or self._pending_image_bytes >= IMAGE_ROW_GROUP_BYTES:
            self.flush()

    def _source(self) -> ImageSource:
        if self._image_source is None:
            raise ValueError("a table with images needs their source")
        return self._image_source

    def _with_image_bytes(self, table: pa.Table) -> pa.Table:
        """The table with each embedded column's paths turned into ``{"bytes", "path"}``
        structs holding the bytes (each distinct file read once per row group)."""
        read: dict[str, bytes] = {}

        def images(paths: pa.Array) -> pa.StructArray:
            names = paths.to_pylist()
            data = [
                read.get(name) or read.setdefault(name, self._source().read_bytes(name))
                for name in names
            ]
            return pa.StructArray.from_arrays([_binary_array(data), paths], fields=list(IMAGE_TYPE))

        columns = []
        for field in self.table.json_schema:
            column = table.column(field.name).combine_chunks()
            kind = self.table.images.get(field.name)
            if kind == IMAGE_LIST:
                column = pa.ListArray.from_arrays(column.offsets, images(column.flatten()))
            elif kind == IMAGE_ONE:
                column = images(column)
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=self._schema)

    def flush(self) -> None:
        if not self._pending:
            return
        lines, rows = self._lines, self._pending
        self._lines, self._pending, self._pending_image_bytes = bytearray(), 0, 0
        self._wait()
        if self._flusher is None:
            self._write_group(lines, rows)
        else:
            self._in_flight = self._flusher.submit(self._write_group, lines, rows)

    def _wait(self) -> None:
        """Waits for the row group in flight, if any (raising what its writing raised)."""
        if self._in_flight is not None:
            in_flight, self._in_flight = self._in_flight, None
            in_flight.result()

    def _write_group(self, lines: bytearray, rows: int) -> None:
        self._jsonl.write(lines)
        # The Parquet rows are the JSON lines parsed back by Arrow's reader against the schema:
        # the two files cannot disagree, and it is several times faster than from_pylist.
        table = pa_json.read_json(
            pa.BufferReader(pa.py_buffer(lines)),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=len(lines) + 1),
            parse_options=pa_json.ParseOptions(
                explicit_schema=self.table.json_schema, unexpected_field_behavior="error"
            ),
        )
        if self.table.images:
            table = self._with_image_bytes(table)
        self._parquet.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.arrow_bytes += table.nbytes
        del table
        self.rows += rows

    def close(self) -> dict[str, FileEntry]:
        """Writes what is left and closes the files; their entries by path in the release."""
        self.flush()
        self._wait()
        self._parquet.close()
        self._parquet_file.close()
        self._jsonl.close()
        return {
            self._parquet_path: self._parquet_file.entry,
            self._jsonl_path: self._jsonl.entry,
        }


def release_tables(multimodal: bool, av_kinds: Sequence[str] = ()) -> dict[str, Table]:
    """The tables of a release, by config, in the card's order."""
    tables = {
        DEFAULT_CONFIG: preference_table(multimodal, av_kinds),
        TIES_CONFIG: tie_table(multimodal, av_kinds),
    }
    if multimodal:
        tables[IMAGE_PREFERENCE_CONFIG] = image_preference_table()
    return tables


class SplitFiles:
    """One split's files: the preferences (``data/``), the ties (``ties/``), the image
    preferences (``image_preference/``), each with its JSON lines under ``jsonl/`` and opened
    on its first row, ``mmrb2/<split>.json`` with every pair, ties included, and an
    Omni-RewardBench file per task of the benchmark that has pairs, opened on its first."""

    def __init__(
        self,
        open_file: Callable[[str], HashingFile],
        split: str,
        tables: Mapping[str, Table],
        image_source: ImageSource | None = None,
        flusher: Executor | None = None,
    ):
        self._flusher = flusher
        self.split = split
        self.tables = tables
        self.files: dict[str, TableFiles] = {}
        self._open_file = open_file
        self._image_source = image_source
        self._mmrb2 = open_file(f"{MMRB2_DIR}/{split}.json")
        self._mmrb2.write(b'{"pairs": [\n')
        self._mmrb2_lines = bytearray()
        self._mmrb2_rows = 0
        self._omni: dict[str, HashingFile] = {}  # task -> its file, a JSON list

    def add(
        self,
        rows: Mapping[str, dict[str, Any] | None],
        mmrb2: dict[str, Any],
        omni: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """One pair: its row of each table it has one in (by config), its MMRB2 record, and
        its task's Omni-RewardBench record, if it has one."""
        if omni is not None:
            self._omni_add(*omni)
        for config, row in rows.items():
            if row is None:
                continue
            if config not in self.files:
                self.files[config] = TableFiles(
                    self._open_file,
                    self.tables[config],
                    self.split,
                    self._image_source,
                    self._flusher,
                )
            self.files[config].add(row)
        if self._mmrb2_rows:
            self._mmrb2_lines += b",\n"
        self._mmrb2_lines += orjson.dumps(mmrb2)
        self._mmrb2_rows += 1
        if self._mmrb2_rows % ROW_GROUP_ROWS == 0:
            self._mmrb2.write(self._mmrb2_lines)
            self._mmrb2_lines = bytearray()

    def _omni_add(self, task: str, record: dict[str, Any]) -> None:
        # Written a record at a time: Omni-RewardBench's files are small (a few thousand
        # records each), and the file handle buffers them.
        out = self._omni.get(task)
        if out is None:
            out = self._omni[task] = self._open_file(omni_file(self.split, task))
            out.write(b"[\n")
        else:
            out.write(b",\n")
        out.write(orjson.dumps(record))

    @property
    def omni_files(self) -> int:
        return len(self._omni)

    def rows_of(self, config: str) -> int:
        files = self.files.get(config)
        return 0 if files is None else files.rows

    def bytes_of(self, config: str) -> int:
        files = self.files.get(config)
        return 0 if files is None else files.arrow_bytes

    def close(self) -> dict[str, FileEntry]:
        """Writes what is left and closes the files; their entries by path in the release."""
        entries: dict[str, FileEntry] = {}
        for config in sorted(self.files):
            entries |= self.files[config].close()
        self._mmrb2.write(self._mmrb2_lines)
        self._mmrb2.write(b"\n]}\n")
        self._mmrb2.close()
        entries[f"{MMRB2_DIR}/{self.split}.json"] = self._mmrb2.entry
        for task in sorted(self._omni):
            out = self._omni[task]
            out.write(b"\n]\n")
            out.close()
            entries[omni_file(self.split, task)] = out.entry
        return entries
