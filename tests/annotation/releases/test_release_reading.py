"""How a build reads its rows (docs/releases.md, "Speed"): on PostgreSQL outside a
transaction, on a thread of its own with its own connection, in one snapshot, made into
pairs on a second thread, each a chunk ahead; inside a transaction, in the caller's thread.
Both give the same pairs."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from annotation.models import Pair, PriorAnnotation, Vote
from annotation.releases import rows
from annotation.releases.rows import release_pairs
from annotation.releases.selection import check_selection
from tests.annotation.releases.conftest import CONSENSUS_VOTES, releasable_project

pytestmark = pytest.mark.django_db(transaction=True)

SELECTION = {"splits": "train=0.5,test=0.5", "include_ensemble": True, "include_ties": True}


def _read(project) -> list[tuple[int, list]]:
    return list(release_pairs(project, check_selection(SELECTION)))


READERS = ("release-reader", "release-rows")


def _readers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name in READERS]


def _backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _backends_back_to(count: int) -> bool:
    """Whether the other sessions on the database come back to ``count`` (a closed
    connection's backend takes a moment to leave pg_stat_activity)."""
    for _ in range(50):
        if _backends() == count:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def released(project, alice, bob, carol, monkeypatch):
    releasable_project(project, alice, bob, carol)
    first = Pair.objects.get(project=project, external_id="rel-00")
    PriorAnnotation.objects.create(pair=first, position=0, value=3, response="A", rating="7")
    monkeypatch.setattr(rows, "CHUNK_PAIRS", 3)  # several chunks of a dozen pairs
    return project


def test_the_threads_read_the_pairs_the_callers_thread_reads(released, monkeypatch):
    reading, making = [], []
    real_read, real_make = rows._chunk_rows, rows._pairs_of

    def read(*args):
        reading.append(threading.current_thread().name)
        yield from real_read(*args)

    def make(*args):
        making.append(threading.current_thread().name)
        return real_make(*args)

    monkeypatch.setattr(rows, "_chunk_rows", read)
    monkeypatch.setattr(rows, "_pairs_of", make)
    background = _read(released)
    made_in_background, making[:] = list(making), []
    with transaction.atomic():
        here = _read(released)
    caller = threading.current_thread().name
    assert reading == ["release-reader", caller]
    assert set(made_in_background) == {"release-rows"}
    assert set(making) == {caller}
    assert len(background) > 2
    assert background == here
    pairs = [pair for _, chunk in background for _, pair in chunk]
    ids = [pair.external_id for pair in pairs]
    assert ids == sorted(ids, key=str.encode)
    assert {"rel-00", "rel-tie", "rel-adjudicated", "rel-easy"} <= set(ids)
    first = next(pair for pair in pairs if pair.external_id == "rel-00")
    assert first.votes == [3, *CONSENSUS_VOTES["rel-00"]]  # the prior first, then the votes
    assert first.ratings is not None


def test_every_chunk_is_read_in_the_snapshot_of_the_first(released):
    chunks = iter(release_pairs(released, check_selection(SELECTION)))
    _, first = next(chunks)
    # The last pair is in the last chunk, which the thread, a chunk ahead, has not read yet:
    # changed now, it is still read as it was when the first chunk was.
    last = Pair.objects.filter(project=released, is_gold=False).latest("external_id")
    votes = Vote.objects.filter(pair=last).count()
    assert votes
    assert last.external_id not in {pair.external_id for _, pair in first}
    flipped = "A" if last.consensus_label == "B" else "B"
    Pair.objects.filter(pk=last.pk).update(consensus_label=flipped)
    Vote.objects.filter(pair=last).delete()
    later = [pair for _, chunk in chunks for _, pair in chunk]
    read = next(pair for pair in later if pair.pk == last.pk)
    assert read.label == last.consensus_label != flipped
    assert len(read.votes) == votes


def test_a_consumer_that_stops_early_stops_the_thread_and_closes_its_connection(released):
    backends = _backends()
    chunks = release_pairs(released, check_selection(SELECTION))
    next(chunks)
    assert _readers()
    chunks.close()
    assert _readers() == []
    assert _backends_back_to(backends)


@pytest.mark.parametrize("stage", ["_ChunkRows", "_human_values"])
def test_an_error_in_either_thread_reaches_the_consumer_and_both_end(stage, released, monkeypatch):
    """The reading thread's (its chunk's rows) or the pairs' thread's (their votes)."""
    backends = _backends()
    calls = []
    real = getattr(rows, stage)

    def failing(*args):
        calls.append(threading.current_thread().name)
        if len(calls) == 2:
            raise RuntimeError("votes unreadable")
        return real(*args)

    monkeypatch.setattr(rows, stage, failing)
    chunks = release_pairs(released, check_selection(SELECTION))
    next(chunks)
    with pytest.raises(RuntimeError, match="votes unreadable"):
        for _ in chunks:
            pass
    assert set(calls) == {"release-reader" if stage == "_ChunkRows" else "release-rows"}
    assert _readers() == []
    assert _backends_back_to(backends)


def test_the_first_chunk_is_a_small_one(released, monkeypatch):
    """The build encodes nothing until the first chunk comes: it is read and made first."""
    monkeypatch.setattr(rows, "FIRST_CHUNK_PAIRS", 1)
    background = _read(released)
    with transaction.atomic():
        here = _read(released)
    for chunks in (background, here):
        sizes = [read for read, _ in chunks]
        assert sizes[:3] == [1, 3, 3]
        assert sum(sizes) == rows.pairs_total(released, check_selection(SELECTION))


# What the build's LATERAL lookups stand for: the same rows as plain joins.
_JOINS_SQL = (
    rows._ROWS_SQL.replace("replace(p.prompt_id::text, '-', '')", "p.prompt_id").split(
        "CROSS JOIN LATERAL"
    )[0]
    + f"""JOIN {rows._PROMPT} q ON q.id = p.prompt_id
JOIN {rows._RESPONSE} a ON a.id = p.response_a_id
JOIN {rows._RESPONSE} b ON b.id = p.response_b_id
WHERE {{ids}}
"""
)


def test_the_lateral_lookups_give_the_rows_the_joins_give(released):
    ids = list(Pair.objects.filter(project=released).values_list("pk", flat=True))
    condition, params = rows._ids_in("p.id", ids)
    found = {}
    for kind, sql in (("lateral", rows._ROWS_SQL), ("joins", _JOINS_SQL)):
        with connection.cursor() as cursor:
            cursor.execute(sql.format(label="consensus_label", ids=condition), params)
            # The prompt's id: its 32 hex digits through the lookups, a UUID through the joins.
            found[kind] = sorted(
                (*row[:2], rows._prompt_key(row[2]), *row[3:]) for row in cursor.fetchall()
            )
    assert "CROSS JOIN LATERAL" not in _JOINS_SQL
    assert len(found["lateral"]) == len(ids) > 10
    assert found["lateral"] == found["joins"]
