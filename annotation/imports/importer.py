"""Importing pairs: all or nothing, streamed, in batches.

``pairs_import`` reads the file pair by pair, checks each one, resolves its images and writes
batches of rows inside one transaction; on any problem it collects the errors (line and
field), rolls back and raises ``ImportFailed``. Prompts, responses and media have ids derived
from their content, so identical ones are written once and a second import of the same file
adds nothing. Imports into one project are serialised, so rows found missing are written
without conflict handling (``writer``), while a reader thread prepares the next batch
(``threads``). Media, shared by all projects, go in with ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.db import connection, transaction

from annotation.core.content import (
    AV_PART_TYPES,
    image_part,
    media_part,
    parts_json,
    prompt_key,
    response_key,
    text_part,
)
from annotation.core.jobs import TIME_LIMIT_ERRORS
from annotation.core.media_keys import media_url_key
from annotation.core.search import search_words
from annotation.core.threads import in_background
from annotation.decisions.lifecycle import Decision
from annotation.decisions.services import ImportConsensus
from annotation.imports import progress as job_records
from annotation.imports.bucket_folder import BucketFolder
from annotation.imports.errors import ImportFailed, ImportIssue, IssueCollector
from annotation.imports.locks import lock_project, restore_constraint_checks
from annotation.imports.media import MediaRecord, MediaStore, Prefetch
from annotation.imports.omni import omni_record, omni_task
from annotation.imports.parse import PairFileReader, RawRecord
from annotation.imports.progress import Progress, ProgressCallback
from annotation.imports.source import cyclic_gc_paused, open_source, unpack_archive
from annotation.imports.summary import ImportJobFinished, ImportSummary
from annotation.imports.validate import TEXT, PairSpec, pair_spec
from annotation.imports.writer import BulkWriter, RawJson
from annotation.media.media_pool import MediaPool
from annotation.media.services import ImageInfo, MediaError, image_row
from annotation.models import (
    ImportJob,
    Media,
    Pair,
    PairStatus,
    PriorAnnotation,
    Project,
    ProjectMedia,
    Prompt,
    Response,
)

logger = logging.getLogger(__name__)

BATCH_SIZE = 2000
# Pairs whose video and audio files are checked together, in parallel.
MEDIA_WINDOW_PAIRS = 16
WRITTEN_IDS_LIMIT = 1_000_000  # about 70 MB of remembered pair, prompt or response ids


def pairs_import(
    *,
    project: Project,
    source: str | os.PathLike | BinaryIO,
    media_root: str | os.PathLike | None = None,
    archive: str | os.PathLike | BinaryIO | None = None,
    media_bucket_prefix: str | None = None,
    job: ImportJob | None = None,
    progress: ProgressCallback | None = None,
    batch_size: int = BATCH_SIZE,
    locked: bool = False,
) -> ImportSummary:
    """Imports the pairs in ``source`` (JSONL or ``{"pairs": [...]}``) into ``project``.
    Image paths are relative to ``media_root``, to the unpacked ``archive``, or to the
    bucket key prefix ``media_bucket_prefix`` (``annotation/imports/bucket.py``). Raises
    ``ImportFailed`` with line-numbered errors, and then nothing was written. ``locked``:
    the caller holds the project's import lock (``project_import_lock``); otherwise the
    import waits for it (the command line)."""
    started = time.monotonic()
    try:
        with ExitStack() as stack:
            stack.enter_context(cyclic_gc_paused())
            stream, name, total = open_source(source, stack)
            if job is not None:
                # Its upload is stored under a key of the server's choosing: the name the
                # curator's file had says what it is (an Omni-RewardBench task file...).
                name = job.filename or name
                job_records.job_started(job, total)
            if archive is not None:
                media_root = unpack_archive(archive, stack)
            bucket = None
            if media_bucket_prefix is not None:
                bucket = BucketFolder(media_bucket_prefix)
                stack.callback(bucket.close)
            store = MediaStore(
                media_root=Path(media_root) if media_root else None,
                pool=MediaPool(),
                media_bucket=bucket,
            )
            stack.callback(store.discard)
            reporter = stack.enter_context(Progress(job, progress, total))
            with transaction.atomic():
                lock_project(project, wait=not locked)
                if job is not None and job_records.job_status(job) in job_records.FINISHED:
                    raise ImportJobFinished
                importer = _Importer(project=project, store=store, batch_size=batch_size, job=job)
                importer.run(PairFileReader(stream, name=name), reporter)
                if not importer.summary.pairs_read and not importer.issues:
                    importer.issues.add(ImportIssue(None, None, "the file holds no pairs"))
                if importer.issues:
                    raise importer.issues.failure()
                restore_constraint_checks()
                store.publish()
                summary = importer.summary
                if job is not None:
                    job_records.job_succeeded(job, summary, total)
            summary.seconds = time.monotonic() - started
    except ImportFailed as failure:
        if job is not None:
            job_records.job_failed(job, failure.as_list())
        logger.info(
            "import refused",
            extra={"project": project.slug, "errors": failure.total, "job": job and job.pk},
        )
        raise
    except (ImportJobFinished, *TIME_LIMIT_ERRORS):
        raise  # a time limit is recorded in words by the task (annotation.core.jobs.JobTask)
    except Exception as exc:
        if job is not None:
            message = f"The import stopped on an internal error ({type(exc).__name__})."
            job_records.job_failed(job, job_records.job_error(message))
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


@dataclass
class _PairRow:
    """A checked pair as the rows it becomes (JSON already encoded), built by
    the reader thread so that the writer only writes."""

    spec: PairSpec
    prompt: dict
    responses: tuple[dict, dict]
    pair: dict
    images: dict[str, ImageInfo | MediaRecord]

    @property
    def fingerprint(self) -> tuple:
        return tuple(self.pair[column] for column in _FINGERPRINT_COLUMNS)


_UNDECIDED = {
    "status": str(PairStatus.IMPORTED),
    "consensus_label": "",
    "dispute_reason": "",
    "decided_at": None,
}
_FINGERPRINT_NAMES = ("prompt", "response_a", "response_b", "criterion", "task")
_FINGERPRINT_COLUMNS = ("prompt_id", "response_a_id", "response_b_id", "criterion", "task")


class _WrittenIds:
    """What this import wrote, as integer keys (``key``): content ids (32 hex digits, kept as
    integers, a third of the memory) or pair ids (their hashes: one found among them, written
    earlier or a collision, is looked up). When the project had no such rows before, the
    memory is ``complete``: an id whose key is not in it is new, with no need to ask the
    database. Past ``WRITTEN_IDS_LIMIT`` ids it is dropped and the database is asked again."""

    def __init__(self, *, complete: bool, key: Callable[[str], int]):
        self.complete = complete
        self._key = key
        self._keys: set[int] = set()

    def __contains__(self, pk: str) -> bool:
        return self._key(pk) in self._keys

    def remember(self, ids) -> None:
        if not self.complete:
            return
        self._keys.update(map(self._key, ids))
        if len(self._keys) > WRITTEN_IDS_LIMIT:
            self.complete = False
            self._keys.clear()


def _hex_key(pk: str) -> int:
    return int(pk, 16)


class _Importer:
    def __init__(
        self, *, project: Project, store: MediaStore, batch_size: int, job: ImportJob | None
    ):
        self.project = project
        self.job = job
        self.store = store
        self.batch_size = batch_size
        self.issues = IssueCollector()
        self.summary = ImportSummary()
        self.writer = BulkWriter()
        self.linked_media: set[str] = set()
        self.consensus = ImportConsensus(project=project)
        self._decided_columns: dict[Decision, dict] = {}
        self._analyze_at = 0
        self.written = {
            model: _WrittenIds(
                complete=not model.objects.filter(project=project).exists(), key=_hex_key
            )
            for model in (Prompt, Response)
        }
        self.written_pairs = _WrittenIds(
            complete=not Pair.objects.filter(project=project).exists(), key=hash
        )

    def run(self, reader: PairFileReader, reporter: Progress) -> None:
        # Reading, checking and hashing (Python) overlap with writing (the database), and
        # the database writes one batch while this thread prepares the next.
        with self.writer.in_order():
            for batch in in_background(self._batches(reader), name="import-reader"):
                self._flush(batch)
                reporter.update(reader.bytes_read, self.summary.pairs_read)
        reporter.update(reader.bytes_read, self.summary.pairs_read, force=True)

    def _batches(self, reader: PairFileReader) -> Iterator[list[_PairRow]]:
        """Checked pairs with their images resolved, in batches; touches no database. The
        media files of a few pairs at a time are checked together (in parallel,
        ``MediaStore.prefetch``) before their pairs are resolved one by one; the next
        window's files are handed over first, so the children never wait for the reader."""
        batch: list[_PairRow] = []
        windows: deque[tuple[list[PairSpec], Prefetch]] = deque()
        try:
            for specs in self._spec_windows(reader):
                windows.append((specs, self.store.prefetch(_media_parts(specs))))
                if len(windows) > 1:
                    yield from self._window_rows(*windows.popleft(), batch)
            while windows:
                yield from self._window_rows(*windows.popleft(), batch)
        finally:
            for _specs, prefetch in windows:
                prefetch.close()
        if batch:
            yield batch

    def _window_rows(
        self, specs: list[PairSpec], prefetch: Prefetch, batch: list[_PairRow]
    ) -> Iterator[list[_PairRow]]:
        """Resolves a window's pairs into ``batch`` once its files are checked; yields each
        batch filled, then starts the next."""
        prefetch.finish()
        for spec in specs:
            row = self._resolve(spec)
            if row is not None:
                batch.append(row)
            if len(batch) >= self.batch_size:
                yield batch[:]
                batch.clear()

    def _spec_windows(self, reader: PairFileReader) -> Iterator[list[PairSpec]]:
        """The file's valid pairs, MEDIA_WINDOW_PAIRS at a time; problems are collected."""
        window: list[PairSpec] = []
        scale, allow_urls = self.project.scale, self.project.allow_media_urls
        # An Omni-RewardBench task file (text_to_video_preferences.json, ...) is read as it is.
        omni = omni_task(reader.name)
        for item in reader:
            if isinstance(item, ImportIssue):
                self.issues.add(item)
                continue
            self.summary.pairs_read += 1
            converted = omni_record(item.data, task=omni)
            if converted is not None:
                item = RawRecord(item.line, converted)
            spec, problems = pair_spec(item, scale=scale, allow_urls=allow_urls)
            if spec is None:
                self.issues.extend(problems)
                continue
            window.append(spec)
            if len(window) >= MEDIA_WINDOW_PAIRS:
                yield window
                window = []
        if window:
            yield window

    def _resolve(self, spec: PairSpec) -> _PairRow | None:
        """Turns image references into stored media and derives the content ids."""
        images: dict[str, ImageInfo | MediaRecord] = {}
        failed = False

        def content_of(parts: list[tuple[str, str]], field: str) -> list[dict]:
            nonlocal failed
            out = []
            for index, (kind, value) in enumerate(parts):
                if kind == TEXT:
                    out.append(text_part(value))
                    continue
                if kind in AV_PART_TYPES:
                    try:
                        record = self.store.resolve_media(value, kind=kind)
                    except MediaError as exc:
                        self.issues.add(ImportIssue(spec.line, f"{field}[{index}]", str(exc)))
                        failed = True
                        continue
                    images[record.sha256] = record
                    images.update((poster.sha256, poster) for poster in record.extra)
                    out.append(media_part(kind, record.sha256))
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
        encode = self.writer.encode
        prompt_content = content_of(spec.prompt_parts, spec.prompt_field)
        responses = []
        for response in (spec.response_a, spec.response_b):
            content = content_of(response.parts, response.field)
            # Encoded once: the same text is hashed into the id and written to the row. Ids
            # are hex text, which COPY writes as it is into the uuid columns.
            encoded = parts_json(content)
            responses.append(
                {
                    "id": response_key(project_id, response.model_name, encoded),
                    "project_id": project_id,
                    "content": RawJson(encoded),
                    "model_name": response.model_name,
                }
            )
        if failed:
            return None
        encoded = parts_json(prompt_content)
        prompt = {
            "id": prompt_key(project_id, encoded),
            "project_id": project_id,
            "content": RawJson(encoded),
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
            **self._decision(spec),
            "search_words": search_words(
                external_id=spec.external_id,
                texts=(value for kind, value in spec.prompt_parts if kind == TEXT),
                model_names=(spec.response_a.model_name, spec.response_b.model_name),
            ),
        }
        return _PairRow(spec, prompt, (responses[0], responses[1]), pair, images)

    def _decision(self, spec: PairSpec) -> dict:
        """The pair's consensus columns: decided here when its prior votes reach the target
        (docs/import-format.md, "Prior votes decide"). Every row has the same columns (COPY
        writes one column list per batch)."""
        decision = self.consensus.decide([value for value, _ in spec.annotations])
        if decision is None:
            return _UNDECIDED
        columns = self._decided_columns.get(decision)
        if columns is None:
            # One dict per distinct decision (there are a handful), of plain strings: COPY
            # adapts a str faster than a TextChoices member.
            columns = {
                "status": str(decision.status),
                "consensus_label": str(decision.label),
                "dispute_reason": str(decision.reason),
                "decided_at": self.writer.now,
            }
            self._decided_columns[decision] = columns
        return columns

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
        existing = self._stored_fingerprints(list(first_in_batch))
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

    def _stored_fingerprints(self, external_ids: list[str]) -> dict[str, tuple]:
        """The fingerprints of the pairs among ``external_ids`` already in the project. In a
        project that had no pairs before this import, only the ids this import may have
        written already are looked up (usually none: no query)."""
        written = self.written_pairs
        if written.complete:
            external_ids = [external_id for external_id in external_ids if external_id in written]
            if not external_ids:
                return {}
        if self.summary.created_pairs >= self._analyze_at:
            # The planner picks the index for the lookup below from the table's statistics;
            # refreshed each time this import has doubled the project's pairs, they stay
            # true enough for it to use the unique index.
            self.writer.refresh_statistics(Pair, ["project_id", "external_id"])
            self._analyze_at = max(2 * self.summary.created_pairs, 1)
        return {
            external_id: _as_fingerprint(rest)
            for external_id, *rest in self.writer.existing(
                Pair,
                "external_id",
                external_ids,
                project_id=self.project.pk,
                fields=_FINGERPRINT_COLUMNS,
            )
        }

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
        batch_media: dict[str, ImageInfo | MediaRecord] = {}
        for row in rows:
            for sha, info in row.images.items():
                if sha not in self.linked_media:
                    batch_media[sha] = info
        if not batch_media:
            return
        self.writer.settle()  # the queries below run on this thread
        known = set(Media.objects.filter(pk__in=list(batch_media)).values_list("pk", flat=True))
        self.summary.media_reused += len(known)
        self.summary.media_created += len(batch_media) - len(known)
        self.writer.insert_ignoring_conflicts(
            Media,
            [_media_row(info) for sha, info in batch_media.items() if sha not in known],
        )
        self.writer.insert_ignoring_conflicts(
            ProjectMedia,
            [{"project_id": self.project.pk, "media_id": sha} for sha in batch_media],
        )
        self.linked_media.update(batch_media)

    def _write_content(self, rows: list[_PairRow]) -> None:
        prompts: dict[str, dict] = {}
        responses: dict[str, dict] = {}
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
                    del rows_by_id[pk.hex]
            self.writer.insert(model, list(rows_by_id.values()))
            written.remember(rows_by_id)
        self.summary.prompts_created += len(prompts)
        self.summary.responses_created += len(responses)

    def _write_pairs(self, rows: list[_PairRow]) -> None:
        pair_rows = [row.pair for row in rows]
        pair_ids = self.writer.insert_returning_ids(Pair, pair_rows)
        self.written_pairs.remember(row.spec.external_id for row in rows)
        priors = [
            {"pair_id": pair_id, "position": position, "value": value, "label": label}
            for pair_id, row in zip(pair_ids, rows, strict=True)
            for position, (value, label) in enumerate(row.spec.annotations)
        ]
        self.writer.insert(PriorAnnotation, priors)
        # Ratings of each response (MMRB2's reasoning file), after the pair's votes.
        ratings = [
            {
                "pair_id": pair_id,
                "position": position,
                "value": None,
                "response": response,
                "rating": rating,
            }
            for pair_id, row in zip(pair_ids, rows, strict=True)
            if row.spec.ratings
            for position, (response, rating) in enumerate(
                row.spec.ratings, start=len(row.spec.annotations)
            )
        ]
        self.writer.insert(PriorAnnotation, ratings)
        self.summary.created_pairs += len(pair_rows)
        for pair in pair_rows:
            status = pair.get("status")
            if status == PairStatus.CONSENSUS:
                self.summary.decided_consensus += 1
            elif status == PairStatus.DISPUTED:
                self.summary.decided_disputed += 1
        self.summary.prior_annotations += len(priors)
        self.summary.prior_ratings += len(ratings)


def _media_parts(specs: list[PairSpec]) -> list[tuple[str, str]]:
    """The ``(kind, reference)`` of every file the pairs ``specs`` name."""
    return [
        part
        for spec in specs
        for parts in (spec.prompt_parts, spec.response_a.parts, spec.response_b.parts)
        for part in parts
        if part[0] != TEXT
    ]


def _as_fingerprint(stored: list) -> tuple:
    """A stored pair's fingerprint columns as a ``_PairRow`` has them (ids in hex)."""
    return tuple(value.hex if isinstance(value, uuid.UUID) else value for value in stored)


def _media_row(info: ImageInfo | MediaRecord) -> dict:
    if isinstance(info, MediaRecord):
        return {**info.row, "url_key": media_url_key(info.sha256)}
    return {**image_row(info), "url_key": media_url_key(info.sha256)}
