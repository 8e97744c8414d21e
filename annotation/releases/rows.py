"""The pairs a selection takes, read from the database (docs/releases.md, "Selection"): their
ids in the release's order (external id, bytewise: the same on every database) through a
server-side cursor a chunk at a time, and each chunk's rows and votes in a few more queries,
so a build holds a chunk or two of rows, never the whole release; a build reads them on a
thread of its own, in one snapshot (``release_pairs``). Raw SQL: a release reads every row
once, and the ORM's per-row work would be most of a build's time."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Generator, Iterator
from dataclasses import dataclass

import orjson
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from annotation.agreement.prior_ratings import mmrb2_ratings
from annotation.core.local_settings import local_settings
from annotation.core.scales import SCALE_VALUES, side_of_value
from annotation.core.threads import in_background
from annotation.models import (
    Adjudication,
    Pair,
    PairStatus,
    PriorAnnotation,
    Project,
    Prompt,
    Response,
    Side,
    Vote,
)
from annotation.releases.formats import ReleasePair, ReleaseResponse
from annotation.releases.selection import Selection

CHUNK_PAIRS = 5000
# The first chunk is smaller: the build encodes nothing until it comes, and a full chunk
# takes its three stages (the database, the pairs, the encoding) about a third of a second
# at 100,000 pairs, with no work to overlap.
FIRST_CHUNK_PAIRS = 500
# A chunk: how many rows it read, and its pairs with their splits.
Chunk = tuple[int, list[tuple[str, ReleasePair]]]


class Source:
    CONSENSUS = "consensus"
    ADJUDICATED = "adjudicated"
    ENSEMBLE = "ensemble"
    REFERENCE = "reference"


def selected_pairs(project: Project, selection: Selection) -> QuerySet:
    """The project's pairs the selection's sources and filters take (all but
    ``min_agreement``, which needs each pair's votes). Never gold or excluded pairs."""
    live = Adjudication.objects.filter(pair_id=OuterRef("pk"), superseded_at__isnull=True)
    pairs = (
        Pair.objects.filter(project=project, is_gold=False)
        .exclude(status=PairStatus.EXCLUDED)
        .annotate(adjudicated=Exists(live))
    )
    if selection.reference_labels:
        return _filtered(_with_reference(pairs, selection), selection)
    decided = Q(status=PairStatus.CONSENSUS)
    if not selection.include_ties:
        decided &= ~Q(consensus_label=Side.TIE)
    if not selection.include_adjudicated:
        decided &= Q(adjudicated=False)
    if not selection.include_consensus:
        decided &= Q(adjudicated=True)
    which = decided if (selection.include_consensus or selection.include_adjudicated) else Q()
    if selection.include_ensemble:
        easy = Q(status=PairStatus.EASY) & ~Q(ensemble_label="")
        if not selection.include_ties:
            easy &= ~Q(ensemble_label=Side.TIE)
        which = (which | easy) if which else easy
    return _filtered(pairs.filter(which), selection)


def _with_reference(pairs: QuerySet, selection: Selection) -> QuerySet:
    """Pairs with an imported reference label (ties only with ``include_ties``)."""
    pairs = pairs.exclude(prior_label="")
    return pairs if selection.include_ties else pairs.exclude(prior_label=Side.TIE)


def _filtered(pairs: QuerySet, selection: Selection) -> QuerySet:
    if selection.tasks:
        pairs = pairs.filter(task__in=selection.tasks)
    if selection.criteria:
        pairs = pairs.filter(criterion__in=selection.criteria)
    return pairs


_PAIR, _PROMPT, _RESPONSE = Pair._meta.db_table, Prompt._meta.db_table, Response._meta.db_table
# The release's order: the selected pairs' ids by external id, read through a server-side
# cursor a chunk at a time; each chunk's rows are then read by id. One ordered query of every
# pair's content sorted hundreds of MB before its first row came back (2 s of the build
# waiting, at 100,000 pairs); ids alone sort in a few milliseconds.
_ORDER_SQL = f"""
SELECT p.id FROM {_PAIR} p WHERE p.id IN ({{selected}}) ORDER BY p.external_id COLLATE "C"
"""
# Each pair's prompt and responses looked up by key (OFFSET 0 keeps each LATERAL subquery a
# lookup): as plain joins, PostgreSQL hashed every chunk against a parallel scan of all the
# prompts, 1.5 s more of its CPU a 100,000-pair build for the same rows. The prompt's id as
# the 32 hex digits its split is drawn from: as text, no UUID object made for each pair.
_ROWS_SQL = f"""
SELECT p.id, p.external_id, replace(p.prompt_id::text, '-', ''), p.status, p.task,
       p.criterion, p.{{label}},
       p.ensemble_label, p.ensemble_agreement, p.ensemble_summary,
       EXISTS (SELECT 1 FROM {Adjudication._meta.db_table} j WHERE j.pair_id = p.id
               AND j.superseded_at IS NULL),
       q.content, a.model_name, a.content, b.model_name, b.content
FROM {_PAIR} p
CROSS JOIN LATERAL (SELECT content FROM {_PROMPT} WHERE id = p.prompt_id OFFSET 0) q
CROSS JOIN LATERAL (SELECT model_name, content FROM {_RESPONSE}
                    WHERE id = p.response_a_id OFFSET 0) a
CROSS JOIN LATERAL (SELECT model_name, content FROM {_RESPONSE}
                    WHERE id = p.response_b_id OFFSET 0) b
WHERE {{ids}}
"""
# PostgreSQL's JIT compiler spent longer optimising the stream's queries than running them
# takes (seconds, at 100,000 pairs), and the sort by external id fits in memory at this size
# instead of spilling to disk. Set for the reading's transaction only (never the session:
# behind PgBouncer it would reach an annotator's request).
_READING_SETTINGS = {"jit": "off", "work_mem": "64MB"}


_PRIORS_SQL = f"""
SELECT pair_id, position, value FROM {PriorAnnotation._meta.db_table}
WHERE {{ids}} AND value IS NOT NULL ORDER BY pair_id, position
"""
_RATINGS_SQL = f"""
SELECT pair_id, response, rating FROM {PriorAnnotation._meta.db_table}
WHERE {{ids}} AND rating <> '' ORDER BY pair_id, position
"""
_VOTES_SQL = f"""
SELECT pair_id, annotator_id, value FROM {Vote._meta.db_table}
WHERE {{ids}} AND NOT is_adjudication ORDER BY pair_id, created_at, id
"""


def _ids_in(column: str, ids: list[int]) -> tuple[str, list]:
    """``column`` among ``ids``: one array parameter (one plan whatever the count)."""
    # An array literal is one short text to send; a list parameter is adapted per item.
    return f"{column} = ANY(%s::bigint[])", ["{" + ",".join(map(str, ids)) + "}"]


@dataclass(slots=True)
class _ChunkRows:
    """What the database gives for a chunk of pair ids, as read: the pairs' rows, their
    prior values ``(pair_id, position, value)`` and votes ``(pair_id, annotator_id, value)``
    in the order they were given, and their prior ratings ``(pair_id, response, rating)``."""

    ids: list[int]
    rows: list[tuple]
    priors: list[tuple]
    votes: list[tuple]
    ratings: list[tuple]


def _human_values(chunk: _ChunkRows) -> dict[int, list[tuple[int, int]]]:
    """Each pair's human values as ``(rater, value)``: prior annotations in position order
    (rater -N for the import's "prior #N"), then votes (never an adjudication) in the order
    they were given (rater: the annotator's id)."""
    values: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for pair_id, position, prior in chunk.priors:
        values[pair_id].append((-(position + 1), prior))
    for pair_id, annotator_id, value in chunk.votes:
        values[pair_id].append((annotator_id, value))
    return values


def _add_ratings(chunk: _ChunkRows, pairs: list[ReleasePair]) -> None:
    """Sets each pair's prior ratings of its responses (MMRB2's reasoning file), if any."""
    if not pairs or not chunk.ratings:
        return
    by_pk = {pair.pk: pair for pair in pairs}
    rated: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pair_id, response, rating in chunk.ratings:
        if pair_id in by_pk:
            rated[pair_id].append((response, rating))
    for pair_id, rows in rated.items():
        by_pk[pair_id].ratings = mmrb2_ratings(rows)


def _json(value):
    """A JSON column as the driver gives it: text (decoded here) or already decoded."""
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _prompt_key(value) -> str:
    """A prompt id as 32 hex digits, however the database returns a UUID column."""
    return value.hex if isinstance(value, uuid.UUID) else str(value).replace("-", "")


_SIDE_OF = {
    scale: {value: side_of_value(scale, value) for value in values}
    for scale, values in SCALE_VALUES.items()
}


def agreement_of(scale: str, label: str, values: list[int]) -> float | None:
    """The share of ``values`` that lean to ``label`` (docs/releases.md, "Agreement of a
    pair"); None without values."""
    if not values:
        return None
    side_of = _SIDE_OF[scale]
    return sum(1 for value in values if side_of[value] == label) / len(values)


def pairs_total(project: Project, selection: Selection) -> int:
    """How many pairs the query takes (before ``min_agreement``): the progress bar's total."""
    return selected_pairs(project, selection).count()


def selection_is_empty(project: Project, selection: Selection) -> bool:
    """Whether the selection takes no pair at all: one EXISTS query, or, with a minimum
    agreement (which needs each pair's votes), the pairs read until one passes."""
    if not selected_pairs(project, selection).exists():
        return True
    if selection.min_agreement is None:
        return False
    # Read here, in the caller's thread: the first chunk with a pair ends it, nothing to
    # overlap.
    return not any(pairs for _, pairs in _read_pairs(project, selection))


def release_pairs(project: Project, selection: Selection) -> Generator[Chunk, None, None]:
    """The selected pairs a chunk at a time, in external id order: how many rows the chunk
    read, and its pairs with their splits; pairs ``min_agreement`` leaves out are skipped.

    Outside a transaction (a build, in a worker), the chunks are read on a thread of their own
    with its own connection, all in one REPEATABLE READ snapshot (every row, vote and label as
    of one moment), and made into pairs on a second thread, each stage a chunk ahead of the
    next: the database's work for one chunk overlaps the making of the chunk before it, and
    both the build's encoding. Inside a transaction (whose rows another connection might not
    see), they are read here, as the caller asks."""
    if connection.in_atomic_block:
        return _read_pairs(project, selection)
    read = in_background(
        _in_one_snapshot(_chunk_rows(project, selection)), depth=1, name="release-reader"
    )
    return in_background(_made_pairs(project, selection, read), depth=1, name="release-rows")


_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def _in_one_snapshot(chunks: Iterator) -> Iterator:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_SNAPSHOT)
        yield from chunks


def _read_pairs(project: Project, selection: Selection) -> Generator[Chunk, None, None]:
    """The chunks read and made into pairs here, in the caller's thread."""
    return _made_pairs(project, selection, _chunk_rows(project, selection))


def _made_pairs(
    project: Project, selection: Selection, chunks: Iterator[_ChunkRows]
) -> Generator[Chunk, None, None]:
    try:
        for chunk in chunks:
            yield _pairs_of(project, selection, chunk)
    finally:
        if (close := getattr(chunks, "close", None)) is not None:
            close()


def _chunk_rows(project: Project, selection: Selection) -> Generator[_ChunkRows, None, None]:
    selected, params = selected_pairs(project, selection).values("pk").query.sql_with_params()
    # The label column: the reference label instead of the consensus when asked.
    label = "prior_label" if selection.reference_labels else "consensus_label"
    # What a chunk reads, in the order of ``_ChunkRows``' fields after its ids: each
    # statement with the column its ids are matched on.
    statements = (
        (_ROWS_SQL, "p.id"),
        (_PRIORS_SQL, "pair_id"),
        (_VOTES_SQL, "pair_id"),
        (_RATINGS_SQL, "pair_id"),
    )
    size = CHUNK_PAIRS
    first = min(FIRST_CHUNK_PAIRS, size)
    with (
        local_settings(**_READING_SETTINGS),
        connection.chunked_cursor() as stream,
        connection.cursor() as cursor,
    ):
        stream.execute(_ORDER_SQL.format(selected=selected), params)
        while ids := [pk for (pk,) in stream.fetchmany(first or size)]:
            first = 0
            found = []
            for sql, ids_column in statements:
                condition, id_params = _ids_in(ids_column, ids)
                cursor.execute(sql.format(label=label, ids=condition), id_params)
                found.append(cursor.fetchall())
            yield _ChunkRows(ids, *found)


def _pairs_of(project: Project, selection: Selection, chunk: _ChunkRows) -> Chunk:
    by_id = {row[0]: row for row in chunk.rows}
    # A pair deleted since the ids were read (outside a snapshot) is left out.
    rows = [by_id[pk] for pk in chunk.ids if pk in by_id]
    values = _human_values(chunk)
    pairs = [
        pair
        for row in rows
        if (pair := _pair(project, selection, row, values.get(row[0], []))) is not None
    ]
    _add_ratings(chunk, [pair for _, pair in pairs])
    return len(chunk.ids), pairs


def _pair(project: Project, selection: Selection, row: tuple, rated: list[tuple[int, int]]):
    (
        pk,
        external_id,
        prompt_id,
        status,
        task,
        criterion,
        consensus_label,
        ensemble_label,
        ensemble_agreement,
        ensemble_summary,
        adjudicated,
        prompt,
        model_a,
        content_a,
        model_b,
        content_b,
    ) = row
    votes = [value for _, value in rated]
    if selection.reference_labels:  # consensus_label holds the reference label here
        label, source = consensus_label, Source.REFERENCE
        agreement = agreement_of(project.scale, label, votes)
    elif status == PairStatus.EASY:
        label, source, agreement = ensemble_label, Source.ENSEMBLE, ensemble_agreement
    else:
        label = consensus_label
        source = Source.ADJUDICATED if adjudicated else Source.CONSENSUS
        agreement = agreement_of(project.scale, label, votes)
    if selection.min_agreement is not None and (
        agreement is None or agreement < selection.min_agreement
    ):
        return None
    pair = ReleasePair(
        pk=pk,
        raters=[rater for rater, _ in rated],
        external_id=external_id,
        task=task,
        criterion=criterion,
        prompt=_json(prompt),
        response_a=ReleaseResponse(model_a, _json(content_a)),
        response_b=ReleaseResponse(model_b, _json(content_b)),
        label=label,
        votes=votes,
        agreement=agreement,
        source=source,
        ensemble_label=ensemble_label,
        ensemble_agreement=ensemble_agreement,
        ensemble_summary=_json(ensemble_summary) or {},
    )
    return selection.split_of(_prompt_key(prompt_id)), pair
