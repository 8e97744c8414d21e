"""How a build writes (docs/releases.md, "Speed"): the archive's gzip gives the same bytes
however its input is cut into writes, a table's files are the same whether its row groups
are written on a thread of their own or not, and the stream's query runs with its session
settings, reset after."""

from __future__ import annotations

import gzip
import io
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from django.db import connection

from annotation.releases.compress import BLOCK_BYTES, GzipMember, gzip_member
from annotation.releases.rows import release_pairs
from annotation.releases.selection import check_selection
from annotation.releases.writer import ROW_GROUP_ROWS, HashingFile, TableFiles, preference_table
from tests.factories import PairFactory


def _cut(data: bytes, rng: random.Random) -> list[bytes | bytearray]:
    """``data`` as writes of sizes around the block size, some empty, some bytearrays."""
    sizes = [0, 1, 100, 4096, BLOCK_BYTES - 1, BLOCK_BYTES, BLOCK_BYTES + 1, 3 * BLOCK_BYTES + 7]
    pieces: list[bytes | bytearray] = []
    start = 0
    while start < len(data):
        size = rng.choice(sizes)
        piece = data[start : start + size]
        pieces.append(bytearray(piece) if len(pieces) % 2 else piece)
        start += size
    return pieces


def test_gzip_gives_the_same_bytes_however_the_writes_are_cut():
    rng = random.Random(7)
    data = bytes(rng.choices(b"abcdefgh \n", k=5 * BLOCK_BYTES + 12_345))
    whole = gzip_member(data)
    assert gzip.decompress(whole) == data
    for _ in range(4):
        out = io.BytesIO()
        with ThreadPoolExecutor(max_workers=2) as pool:
            member = GzipMember(out, pool=pool)
            for piece in _cut(data, rng):
                member.write(piece)
                if isinstance(piece, bytearray):
                    piece[:] = b"x" * len(piece)  # the caller reuses its buffer
            member.close()
        assert out.getvalue() == whole


def _row(n: int) -> dict:
    return {
        "id": f"pair-{n:06d}",
        "prompt": [{"role": "user", "content": f"Question {n}"}],
        "chosen": [{"role": "assistant", "content": f"A good answer {n}"}],
        "rejected": [{"role": "assistant", "content": f"A weak answer {n}"}],
        "images": [],
        "chosen_images": [],
        "rejected_images": [],
        "task": "chat",
        "criterion": "",
        "chosen_model": "m1",
        "rejected_model": "m2",
        "preferred_side": "A",
        "votes": [3, 3, 1],
        "agreement": 2 / 3,
        "source": "consensus",
        "ensemble_label": "",
        "ensemble_agreement": None,
        "ensemble_summary": "",
        "prior_ratings": "",
    }


def _write(folder: Path, rows: list[dict], flusher) -> tuple[dict[str, bytes], TableFiles]:
    def open_file(relative: str) -> HashingFile:
        return HashingFile(folder / relative)

    files = TableFiles(open_file, preference_table(False), "train", flusher=flusher)
    for row in rows:
        files.add(row)
    entries = files.close()
    return {path: (folder / path).read_bytes() for path in entries}, files


def test_row_groups_written_on_a_thread_give_the_same_files(tmp_path):
    rows = [_row(n) for n in range(2 * ROW_GROUP_ROWS + 17)]
    inline, alone = _write(tmp_path / "inline", rows, None)
    with ThreadPoolExecutor(max_workers=1) as flusher:
        threaded, beside = _write(tmp_path / "threaded", rows, flusher)
    assert threaded == inline
    assert (beside.rows, beside.arrow_bytes) == (alone.rows, alone.arrow_bytes)
    assert alone.rows == len(rows)
    assert len(inline["jsonl/train.jsonl"].splitlines()) == len(rows)


def test_a_row_group_that_fails_on_the_thread_fails_the_writing(tmp_path):
    rows = [_row(n) for n in range(ROW_GROUP_ROWS + 1)]
    rows[3]["agreement"] = "not a number"  # the Parquet schema's float64
    with ThreadPoolExecutor(max_workers=1) as flusher, pytest.raises(pa.ArrowInvalid):
        _write(tmp_path, rows, flusher)


@pytest.mark.django_db
def test_the_stream_runs_without_jit_and_with_its_work_mem_reset_after(project):
    PairFactory.create_batch(3, project=project, status="consensus", consensus_label="A")

    def show(name: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute(f"SHOW {name}")
            return cursor.fetchone()[0]

    before = (show("jit"), show("work_mem"))
    seen = [(show("jit"), show("work_mem")) for _ in release_pairs(project, check_selection({}))]
    assert seen == [("off", "64MB")]
    assert (show("jit"), show("work_mem")) == before
