"""Importing pairs: all or nothing, streamed, in batches.

``pairs_import`` reads the file pair by pair, checks each one, resolves its images and writes
batches of rows inside one transaction; on any problem it collects the errors (line and
field), rolls back and raises ``ImportFailed``. Prompts, responses and media have ids derived
from their content, so identical ones are written once and a second import of the same file
adds nothing. Imports into one project are serialised, so rows found missing are written
without conflict handling: by COPY on PostgreSQL, while a reader thread prepares the next
batch. Media, shared by all projects, go in with ``ON CONFLICT DO NOTHING``.

``import_job_submit`` / ``import_job_run`` wrap it for uploads: small ones run at once, large
ones in a Celery task that reports progress on the ``ImportJob``.
"""

from __future__ import annotations

import gc
import json
import logging
import operator
import os
import queue
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from annotation.content import canonical_json, image_part, prompt_id, response_id, text_part
from annotation.imports.archive import ArchiveError, archive_extract
from annotation.imports.errors import ImportFailed, ImportIssue, IssueCollector
from annotation.imports.media import ImageInfo, MediaError, MediaStore
from annotation.imports.parse import IMAGE, PairFileReader, PairSpec, pair_spec
from annotation.models import (
    ImportJob,
    Media,
    Pair,
    PriorAnnotation,
    Project,
    ProjectMedia,
    Prompt,
    Response,
)

logger = logging.getLogger(__name__)

BATCH_SIZE = 2000
WRITTEN_IDS_LIMIT = 1_000_000  # about 70 MB of remembered prompt or response ids
# Namespace of the PostgreSQL advisory lock that serialises imports into one project.
_LOCK_NAMESPACE = 0x41524249
_PROGRESS_INTERVAL_S = 0.5

ProgressCallback = Callable[[int, int, int], None]
"""Called as ``progress(bytes_done, bytes_total, pairs_read)`` after every batch."""


@dataclass
class ImportSummary:
    created_pairs: int = 0
    existing_pairs: int = 0
    prompts_created: int = 0
    responses_created: int = 0
    media_created: int = 0
    media_reused: int = 0
    prior_annotations: int = 0
    pairs_read: int = 0
    seconds: float = 0.0

    @property
    def pairs_per_second(self) -> float:
        return self.pairs_read / self.seconds if self.seconds else 0.0

    def describe(self) -> list[str]:
        return [
            f"Created pairs:      {self.created_pairs}",
            f"Already present:    {self.existing_pairs}",
            f"New prompts:        {self.prompts_created}",
            f"New responses:      {self.responses_created}",
            f"Media:              {self.media_created} new, {self.media_reused} reused",
            f"Prior annotations:  {self.prior_annotations}",
            f"Seconds:            {self.seconds:.2f} ({self.pairs_per_second:,.0f} pairs/s)",
        ]


class ImportJobFinished(Exception):
    """Another run of the same job finished it first (a redelivered task)."""


def pairs_import(
    *,
    project: Project,
    source: str | os.PathLike | BinaryIO,
    media_root: str | os.PathLike | None = None,
    archive: str | os.PathLike | BinaryIO | None = None,
    job: ImportJob | None = None,
    progress: ProgressCallback | None = None,
    batch_size: int = BATCH_SIZE,
) -> ImportSummary:
    """Imports the pairs in ``source`` (JSONL or ``{"pairs": [...]}``) into ``project``.
    Image paths are relative to ``media_root``, or to the unpacked ``archive``. Raises
    ``ImportFailed`` with line-numbered errors, and then nothing was written."""
    started = time.monotonic()
    try:
        with ExitStack() as stack:
            stack.enter_context(_cyclic_gc_paused())
            stream, name, total = _open_source(source, stack)
            if job is not None:
                _job_update(job, status=ImportJob.Status.RUNNING, bytes_total=total, bytes_done=0)
            if archive is not None:
                media_root = _unpack(archive, stack)
            store = MediaStore(media_root=Path(media_root) if media_root else None)
            stack.callback(store.discard)
            reporter = stack.enter_context(_Progress(job, progress, total))
            with transaction.atomic():
                _lock_project(project)
                if job is not None and _job_status(job) in _FINISHED:
                    raise ImportJobFinished
                importer = _Importer(project=project, store=store, batch_size=batch_size)
                importer.run(PairFileReader(stream, name=name), reporter)
                if not importer.summary.pairs_read and not importer.issues:
                    importer.issues.add(ImportIssue(None, None, "the file holds no pairs"))
                if importer.issues:
                    raise importer.issues.failure()
                _restore_constraint_checks()
                store.publish()
                summary = importer.summary
                if job is not None:
                    _job_succeeded(job, summary, total)
            summary.seconds = time.monotonic() - started
    except ImportFailed as failure:
        if job is not None:
            _job_failed(job, failure.as_list())
        logger.info(
            "import refused",
            extra={"project": project.slug, "errors": failure.total, "job": job and job.pk},
        )
        raise
    except ImportJobFinished:
        raise
    except Exception as exc:
        if job is not None:
            message = f"The import stopped on an internal error ({type(exc).__name__})."
            _job_failed(job, [{"line": None, "field": None, "message": message}])
        raise
    logger.info(
        "import finished",
        extra={
            "project": project.slug,
            "created_pairs": summary.created_pairs,
            "existing_pairs": summary.existing_pairs,
            "seconds": round(summary.seconds, 3),
            "job": job and job.pk,
        },
    )
    return summary


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """An import allocates millions of short-lived objects that reference counting frees;
    the cyclic collector would rescan them all again and again (a third of the CPU time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _open_source(source, stack: ExitStack) -> tuple[BinaryIO, str, int]:
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            stream = stack.enter_context(open(path, "rb"))
        except OSError as exc:
            raise ImportFailed([ImportIssue(None, None, f"cannot read {path}: {exc}")]) from None
        return stream, path.name, os.fstat(stream.fileno()).st_size
    stream = source
    stream.seek(0, os.SEEK_END)
    total = stream.tell()
    stream.seek(0)
    return stream, os.path.basename(getattr(source, "name", "") or ""), total


def _unpack(archive, stack: ExitStack) -> Path:
    work = Path(settings.MEDIA_ROOT) / ".unpacked" / uuid.uuid4().hex
    stack.callback(shutil.rmtree, work, ignore_errors=True)
    try:
        archive_extract(source=archive, dest=work)
    except ArchiveError as exc:
        raise ImportFailed([ImportIssue(None, "media archive", str(exc))]) from None
    return work


def _lock_project(project: Project) -> None:
    """Imports into one project run one at a time, so "is this pair id new?" stays true
    until the batch is written. SQLite serialises writers already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, project.pk % 2**31]
            )
            # Foreign keys are checked as each batch is written, while the reader thread
            # prepares the next one, instead of all at once in the commit.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _restore_constraint_checks() -> None:
    """Back to Django's deferred checks, for a caller whose transaction goes on."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


@dataclass
class _PairRow:
    """A checked pair as the rows it becomes (JSON already encoded on PostgreSQL), built by
    the reader thread so that the writer only writes."""

    spec: PairSpec
    prompt: dict
    responses: tuple[dict, dict]
    pair: dict
    images: dict[str, ImageInfo]

    @property
    def fingerprint(self) -> tuple:
        return tuple(self.pair[column] for column in _FINGERPRINT_COLUMNS)


_FINGERPRINT_NAMES = ("prompt", "response_a", "response_b", "criterion", "task")
_FINGERPRINT_COLUMNS = ("prompt_id", "response_a_id", "response_b_id", "criterion", "task")


class _WrittenIds:
    """Ids of the rows this import wrote. When the project had no such rows before, the
    memory is ``complete``: an id not in it is new, with no need to ask the database. Past
    ``WRITTEN_IDS_LIMIT`` ids it is dropped and the database is asked again."""

    def __init__(self, *, complete: bool):
        self.complete = complete
        self._ids: set[int] = set()

    def __contains__(self, pk: uuid.UUID) -> bool:
        return pk.int in self._ids

    def remember(self, ids) -> None:
        if not self.complete:
            return
        self._ids.update(pk.int for pk in ids)
        if len(self._ids) > WRITTEN_IDS_LIMIT:
            self.complete = False
            self._ids.clear()


class _Importer:
    def __init__(self, *, project: Project, store: MediaStore, batch_size: int):
        self.project = project
        self.store = store
        self.batch_size = batch_size
        self.issues = IssueCollector()
        self.summary = ImportSummary()
        self.writer = _BulkWriter()
        self.linked_media: set[str] = set()
        self._analyze_at = 0
        self.encode = _RawJson.encode if self.writer.postgres else _as_is
        self.written = {
            model: _WrittenIds(complete=not model.objects.filter(project=project).exists())
            for model in (Prompt, Response)
        }

    def run(self, reader: PairFileReader, reporter: _Progress) -> None:
        # Reading, checking and hashing (Python) overlap with writing (the database).
        for batch in _in_background(self._batches(reader)):
            self._flush(batch)
            reporter.update(reader.bytes_read, self.summary.pairs_read)
        reporter.update(reader.bytes_read, self.summary.pairs_read, force=True)

    def _batches(self, reader: PairFileReader) -> Iterator[list[_PairRow]]:
        """Checked pairs with their images resolved, in batches; touches no database."""
        batch: list[_PairRow] = []
        scale, allow_urls = self.project.scale, self.project.allow_media_urls
        for item in reader:
            if isinstance(item, ImportIssue):
                self.issues.add(item)
                continue
            self.summary.pairs_read += 1
            spec, problems = pair_spec(item, scale=scale, allow_urls=allow_urls)
            if problems:
                self.issues.extend(problems)
                continue
            row = self._resolve(spec)
            if row is not None:
                batch.append(row)
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _resolve(self, spec: PairSpec) -> _PairRow | None:
        """Turns image references into stored media and derives the content ids."""
        images: dict[str, ImageInfo] = {}
        failed = False

        def content_of(parts: list[tuple[str, str]], field: str) -> list[dict]:
            nonlocal failed
            out = []
            for index, (kind, value) in enumerate(parts):
                if kind != IMAGE:
                    out.append(text_part(value))
                    continue
                try:
                    info = self.store.resolve(value)
                except MediaError as exc:
                    self.issues.add(ImportIssue(spec.line, f"{field}[{index}]", str(exc)))
                    failed = True
                    continue
                images[info.sha256] = info
                out.append(image_part(info.sha256))
            return out

        project_id = self.project.pk
        encode = self.encode
        postgres = self.writer.postgres
        prompt_content = content_of(spec.prompt_parts, spec.prompt_field)
        responses = []
        for response in (spec.response_a, spec.response_b):
            content = content_of(response.parts, response.field)
            # Encoded once: the same text is hashed into the id and written to the row.
            encoded = canonical_json(content)
            responses.append(
                {
                    "id": response_id(project_id, response.model_name, content, encoded=encoded),
                    "project_id": project_id,
                    "content": _RawJson(encoded) if postgres else content,
                    "model_name": response.model_name,
                }
            )
        if failed:
            return None
        encoded = canonical_json(prompt_content)
        prompt = {
            "id": prompt_id(project_id, prompt_content, encoded=encoded),
            "project_id": project_id,
            "content": _RawJson(encoded) if postgres else prompt_content,
            "source": spec.prompt_source,
            "metadata": encode(spec.prompt_metadata),
        }
        metadata = {"prompt_source": spec.prompt_source, "prompt_metadata": spec.prompt_metadata}
        metadata = {key: value for key, value in metadata.items() if value}
        metadata.update(spec.extra)
        pair = {
            "project_id": project_id,
            "external_id": spec.external_id,
            "prompt_id": prompt["id"],
            "response_a_id": responses[0]["id"],
            "response_b_id": responses[1]["id"],
            "criterion": spec.criterion,
            "task": spec.task,
            "metadata": encode(metadata),
            "target_votes": self.project.overlap,
            "prior_label": spec.chosen,
        }
        return _PairRow(spec, prompt, (responses[0], responses[1]), pair, images)

    def _flush(self, batch: list[_PairRow]) -> None:
        new_rows = self._new_rows(batch)
        if self.issues or not new_rows:
            # A refused import is rolled back anyway: keep checking, stop writing.
            return
        self._write_media(new_rows)
        self._write_content(new_rows)
        self._write_pairs(new_rows)
        if connection.queries_logged:
            # DEBUG keeps every query; thousands of bulk statements would fill memory.
            connection.queries_log.clear()

    def _new_rows(self, batch: list[_PairRow]) -> list[_PairRow]:
        """Drops pairs already in the project (counted) and reports ids reused with
        different content."""
        first_in_batch: dict[str, _PairRow] = {}
        unique: list[_PairRow] = []
        for row in batch:
            earlier = first_in_batch.get(row.spec.external_id)
            if earlier is None:
                first_in_batch[row.spec.external_id] = row
                unique.append(row)
            elif earlier.fingerprint == row.fingerprint:
                self.summary.existing_pairs += 1
            else:
                self._conflict(row, earlier.fingerprint, f"on line {earlier.spec.line}")
        if self.summary.created_pairs >= self._analyze_at:
            # The planner picks the index for the lookup below from the table's statistics;
            # refreshed each time this import has doubled the project's pairs, they stay
            # true enough for it to use the unique index.
            self.writer.refresh_statistics(Pair, ["project_id", "external_id"])
            self._analyze_at = max(2 * self.summary.created_pairs, 1)
        existing = {
            external_id: tuple(rest)
            for external_id, *rest in self.writer.existing(
                Pair,
                "external_id",
                list(first_in_batch),
                project_id=self.project.pk,
                fields=_FINGERPRINT_COLUMNS,
            )
        }
        new_rows = []
        for row in unique:
            stored = existing.get(row.spec.external_id)
            if stored is None:
                new_rows.append(row)
            elif stored == row.fingerprint:
                self.summary.existing_pairs += 1
            else:
                self._conflict(row, stored, "in this project (or earlier in this file)")
        return new_rows

    def _conflict(self, row: _PairRow, other: tuple, where: str) -> None:
        differs = [
            name
            for name, mine, theirs in zip(_FINGERPRINT_NAMES, row.fingerprint, other, strict=True)
            if mine != theirs
        ]
        self.issues.add(
            ImportIssue(
                row.spec.line,
                "id",
                f"pair id {row.spec.external_id!r} is already used {where} with a different "
                f"{', '.join(differs)}; give this pair a new id",
            )
        )

    def _write_media(self, rows: list[_PairRow]) -> None:
        batch_media: dict[str, ImageInfo] = {}
        for row in rows:
            for sha, info in row.images.items():
                if sha not in self.linked_media:
                    batch_media[sha] = info
        if not batch_media:
            return
        known = set(Media.objects.filter(pk__in=list(batch_media)).values_list("pk", flat=True))
        self.summary.media_reused += len(known)
        self.summary.media_created += len(batch_media) - len(known)
        self.writer.insert_ignoring_conflicts(
            Media,
            [
                {
                    "sha256": sha,
                    "format": info.format,
                    "width": info.width,
                    "height": info.height,
                    "size_bytes": info.size_bytes,
                    "served_sha256": info.served_sha256,
                    "strip_result": info.strip_result,
                }
                for sha, info in batch_media.items()
                if sha not in known
            ],
        )
        self.writer.insert_ignoring_conflicts(
            ProjectMedia,
            [{"project_id": self.project.pk, "media_id": sha} for sha in batch_media],
        )
        self.linked_media.update(batch_media)

    def _write_content(self, rows: list[_PairRow]) -> None:
        prompts: dict[uuid.UUID, dict] = {}
        responses: dict[uuid.UUID, dict] = {}
        for row in rows:
            prompts.setdefault(row.prompt["id"], row.prompt)
            for response in row.responses:
                responses.setdefault(response["id"], response)
        # Ids are derived from the content and the project (which this import has locked):
        # those not in the table yet are new, and are written without conflict handling.
        for model, rows_by_id in ((Prompt, prompts), (Response, responses)):
            written = self.written[model]
            for pk in [pk for pk in rows_by_id if pk in written]:
                del rows_by_id[pk]
            if not written.complete:
                for pk in self.writer.existing(model, "id", list(rows_by_id)):
                    del rows_by_id[pk]
            self.writer.insert(model, list(rows_by_id.values()))
            written.remember(rows_by_id)
        self.summary.prompts_created += len(prompts)
        self.summary.responses_created += len(responses)

    def _write_pairs(self, rows: list[_PairRow]) -> None:
        pair_rows = [row.pair for row in rows]
        pair_ids = self.writer.insert_returning_ids(Pair, pair_rows)
        priors = [
            {"pair_id": pair_id, "position": position, "value": value, "label": label}
            for pair_id, row in zip(pair_ids, rows, strict=True)
            for position, (value, label) in enumerate(row.spec.annotations)
        ]
        self.writer.insert(PriorAnnotation, priors)
        self.summary.created_pairs += len(pair_rows)
        self.summary.prior_annotations += len(priors)


class _BulkWriter:
    """Writes lists of row dicts: COPY on PostgreSQL, ``bulk_create`` elsewhere. Columns a
    row leaves out get the model field's default."""

    def __init__(self):
        self.postgres = connection.vendor == "postgresql"
        self.now = timezone.now()

    def existing(
        self, model: type[models.Model], column: str, values: list, *, project_id=None, fields=()
    ) -> list:
        """``column`` (and ``fields``) of the rows of ``model`` (in ``project_id``, if given)
        whose ``column`` is one of ``values``: a flat list without ``fields``, tuples with."""
        if not values:
            return []
        if not self.postgres:
            found = model.objects.filter(**{f"{column}__in": values})
            if project_id is not None:
                found = found.filter(project_id=project_id)
            if fields:
                return list(found.values_list(column, *fields))
            return list(found.values_list(column, flat=True))
        quote = connection.ops.quote_name
        key = model._meta.get_field(column)
        names = ", ".join(quote(model._meta.get_field(name).column) for name in (column, *fields))
        scope = "project_id = %s AND " if project_id is not None else ""
        # One array parameter instead of thousands of placeholders, and one index probe per
        # value (the column is unique within the scope): never a scan of the table, whose
        # statistics may predate the rows this import is adding.
        sql = (
            f"SELECT found.* FROM unnest(%s::{key.db_type(connection)}[]) AS wanted(value) "
            f"CROSS JOIN LATERAL (SELECT {names} FROM {quote(model._meta.db_table)} "
            f"WHERE {scope}{quote(key.column)} = wanted.value LIMIT 1) AS found"
        )
        params: list = [values] if project_id is None else [values, project_id]
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            cursor.execute("SET LOCAL enable_seqscan TO DEFAULT")
        return rows if fields else [row[0] for row in rows]

    def refresh_statistics(self, model: type[models.Model], columns: list[str]) -> None:
        """ANALYZE, seeing this transaction's rows; skipped while another import holds it."""
        if self.postgres:
            quote = connection.ops.quote_name
            names = ", ".join(quote(model._meta.get_field(name).column) for name in columns)
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE (SKIP_LOCKED) {quote(model._meta.db_table)} ({names})")

    def insert(self, model: type[models.Model], rows: list[dict]) -> None:
        """Inserts rows that must all be new (a conflict fails the import)."""
        if not rows:
            return
        if self.postgres:
            self._copy(model, rows)
        else:
            model.objects.bulk_create([model(**row) for row in rows], batch_size=500)

    def insert_ignoring_conflicts(self, model: type[models.Model], rows: list[dict]) -> None:
        """For rows another transaction may insert at the same time (media are shared)."""
        if rows:
            model.objects.bulk_create(
                [model(**row) for row in rows], ignore_conflicts=True, batch_size=500
            )

    def insert_returning_ids(self, model: type[models.Model], rows: list[dict]) -> list[int]:
        """Inserts rows that must all be new; returns their primary keys in order."""
        if not rows:
            return []
        if not self.postgres:
            created = model.objects.bulk_create([model(**row) for row in rows], batch_size=500)
            return [obj.pk for obj in created]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                [model._meta.db_table, model._meta.pk.column, len(rows)],
            )
            ids = [value for (value,) in cursor.fetchall()]
        for row, pk in zip(rows, ids, strict=True):
            row[model._meta.pk.attname] = pk
        self._copy(model, rows)
        return ids

    def _copy(self, model: type[models.Model], rows: list[dict]) -> None:
        keys = list(rows[0])
        fields = {f.attname: f for f in model._meta.concrete_fields}
        constants: dict[str, Any] = {}
        for attname, model_field in fields.items():
            if attname in keys or model_field.primary_key:
                continue
            if model_field.has_db_default() and not model_field.has_default():
                continue
            if getattr(model_field, "auto_now", False) or getattr(
                model_field, "auto_now_add", False
            ):
                constants[attname] = self.now
            else:
                value = model_field.get_default()
                is_json = isinstance(model_field, models.JSONField)
                constants[attname] = _json(value) if is_json else value
        json_keys = {key for key in keys if isinstance(fields[key], models.JSONField)}
        constant_values = list(constants.values())
        columns = ", ".join(
            connection.ops.quote_name(fields[key].column) for key in [*keys, *constants]
        )
        table = connection.ops.quote_name(model._meta.db_table)
        pick = operator.itemgetter(*keys) if len(keys) > 1 else (lambda row: (row[keys[0]],))
        json_positions = [index for index, key in enumerate(keys) if key in json_keys]
        with connection.cursor() as cursor:
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                write_row = copy.write_row
                for row in rows:
                    values = [*pick(row), *constant_values]
                    for index in json_positions:
                        values[index] = _json(values[index])
                    write_row(values)


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()


def _in_background(items: Iterator, *, depth: int = 2) -> Iterator:
    """Runs the generator ``items`` in a thread, at most ``depth`` items ahead of the
    consumer; its exceptions are raised in the consumer, and it stops when the consumer does."""
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put(_Raised(exc))

    thread = threading.Thread(target=work, name="import-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


class _RawJson(str):
    """JSON text encoded ahead of time, written as it is."""

    @classmethod
    def encode(cls, value: Any) -> _RawJson:
        if not value and isinstance(value, dict):
            return _EMPTY_OBJECT  # most metadata is empty: skip the encoder
        return cls(_encode(value))


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_EMPTY_OBJECT = _RawJson("{}")


def _as_is(value: Any) -> Any:
    return value


def _json(value: Any) -> str:
    return value if isinstance(value, _RawJson) else _RawJson.encode(value)


# Progress ----------------------------------------------------------------------------


class _Progress:
    """Reports progress to the caller's callback and to the job row. The import runs in a
    transaction, so job progress goes through a second connection that commits at once
    (PostgreSQL only: SQLite has a single writer, and there the bar fills at the end)."""

    def __init__(self, job: ImportJob | None, callback: ProgressCallback | None, total: int):
        self.job = job
        self.callback = callback
        self.total = total
        self._last = 0.0
        self._side = None
        if job is not None and connection.vendor == "postgresql":
            self._side = connections.create_connection(DEFAULT_DB_ALIAS)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._side is not None:
            self._side.close()
            self._side = None

    def update(self, bytes_done: int, pairs_read: int, *, force: bool = False) -> None:
        if self.callback is not None:
            self.callback(bytes_done, self.total, pairs_read)
        now = time.monotonic()
        if self._side is None or (not force and now - self._last < _PROGRESS_INTERVAL_S):
            return
        self._last = now
        with self._side.cursor() as cursor:
            cursor.execute(
                f"UPDATE {ImportJob._meta.db_table} SET bytes_done = %s, lines_done = %s "
                "WHERE id = %s AND status = %s",
                [min(bytes_done, self.total), pairs_read, self.job.pk, ImportJob.Status.RUNNING],
            )


# Import jobs ---------------------------------------------------------------------------

_FINISHED = {ImportJob.Status.SUCCEEDED, ImportJob.Status.FAILED}


def _job_status(job: ImportJob) -> str | None:
    return ImportJob.objects.filter(pk=job.pk).values_list("status", flat=True).first()


def _job_update(job: ImportJob, **values) -> None:
    ImportJob.objects.filter(pk=job.pk).exclude(status__in=_FINISHED).update(**values)
    for key, value in values.items():
        setattr(job, key, value)


def _job_succeeded(job: ImportJob, summary: ImportSummary, total: int) -> None:
    _job_update(
        job,
        status=ImportJob.Status.SUCCEEDED,
        bytes_total=total,
        bytes_done=total,
        lines_done=summary.pairs_read,
        created_pairs=summary.created_pairs,
        existing_pairs=summary.existing_pairs,
        created_media=summary.media_created,
        errors=[],
        finished_at=timezone.now(),
    )


def _job_failed(job: ImportJob, errors: list[dict]) -> None:
    _job_update(job, status=ImportJob.Status.FAILED, errors=errors, finished_at=timezone.now())


def _uploads_root() -> Path:
    # Under MEDIA_ROOT so the web server and workers share it; never served (media is
    # served by content hash only).
    return Path(settings.MEDIA_ROOT) / ".uploads"


def _save_upload(upload: UploadedFile, folder: Path, prefix: str) -> str:
    name = get_valid_filename(os.path.basename(upload.name or "upload"))[-100:] or "upload"
    path = folder / f"{prefix}-{name}"
    with open(path, "wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return str(path.relative_to(Path(settings.MEDIA_ROOT)))


def import_job_submit(
    *, project: Project, user, upload: UploadedFile, archive: UploadedFile | None = None
) -> ImportJob:
    """Stores the uploaded files and imports them: at once when small (the returned job is
    finished), otherwise in a Celery task started after the current transaction commits."""
    from annotation.tasks import import_run

    folder = _uploads_root() / uuid.uuid4().hex
    folder.mkdir(parents=True)
    job = ImportJob.objects.create(
        project=project,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        filename=(upload.name or "upload")[:255],
        upload_path=_save_upload(upload, folder, "pairs"),
        media_archive_path=_save_upload(archive, folder, "media") if archive is not None else "",
        bytes_total=upload.size or 0,
    )
    size = (upload.size or 0) + (archive.size if archive is not None else 0)
    if size <= settings.ARBITER_SYNC_IMPORT_MAX_BYTES:
        return import_job_run(job=job)

    def enqueue() -> None:
        try:
            import_run.delay(job.pk)
        except Exception as exc:  # noqa: BLE001 - a job nobody will run must not stay pending
            logger.exception("import not queued", extra={"job": job.pk})
            import_job_fail(
                job_id=job.pk,
                message=f"The import could not be queued ({type(exc).__name__}); try again.",
            )

    transaction.on_commit(enqueue)
    return job


def import_job_run(*, job: ImportJob) -> ImportJob:
    """Runs a pending job (safe to call twice: a finished job is left alone). The uploaded
    files are removed once the job has finished."""
    claimed = (
        ImportJob.objects.filter(pk=job.pk)
        .exclude(status__in=_FINISHED)
        .update(status=ImportJob.Status.RUNNING)
    )
    if claimed:
        root = Path(settings.MEDIA_ROOT)
        try:
            pairs_import(
                project=job.project,
                source=root / job.upload_path,
                archive=root / job.media_archive_path if job.media_archive_path else None,
                job=job,
            )
        except (ImportFailed, ImportJobFinished):
            pass
    job.refresh_from_db()
    if job.finished:
        import_job_remove_uploads(job=job)
    return job


def import_job_fail(*, job_id: int, message: str) -> None:
    """Records a failure that happened outside the import itself (the task crashed)."""
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is None or job.finished:
        return
    _job_failed(job, [{"line": None, "field": None, "message": message}])
    import_job_remove_uploads(job=job)


def import_job_remove_uploads(*, job: ImportJob) -> None:
    if job.upload_path:
        folder = (Path(settings.MEDIA_ROOT) / job.upload_path).parent
        if folder.parent == _uploads_root():
            shutil.rmtree(folder, ignore_errors=True)
