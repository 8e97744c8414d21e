"""How a build writes (docs/releases.md, "Speed"): the archive's gzip gives the same bytes
however its input is cut into writes, a table's files are the same whether its row groups
are written on a thread of their own or not, and the stream's query runs with its session
settings, reset after."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import random
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from django.db import connection

from annotation.releases.archive import ArchiveParts, archive_write
from annotation.releases.compress import (
    BLOCK_BYTES,
    GzipMember,
    gzip_member,
    stored_crc,
    stored_member,
    stored_member_size,
)
from annotation.releases.framing import INDEX_FORMAT, ArchiveIndex, FolderSource
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


@pytest.mark.parametrize(
    "size",
    [
        0,
        1,
        512,
        65_535,
        65_536,
        BLOCK_BYTES - 5,
        BLOCK_BYTES,
        2 * BLOCK_BYTES,
        5 * BLOCK_BYTES + 77,
    ],
)
def test_a_stored_member_reads_back_as_the_file_and_its_padding(size):
    data = random.Random(size).randbytes(size)
    padding = -size % 512
    # Windows of two blocks, as a file is mapped (a whole number of blocks each but the last).
    windows = [
        memoryview(data)[start : start + 2 * BLOCK_BYTES]
        for start in range(0, size, 2 * BLOCK_BYTES)
    ]
    crc = stored_crc(windows, padding=padding)
    member = b"".join(stored_member(windows, size=size, padding=padding, crc=crc))
    assert gzip.decompress(member) == data + b"\0" * padding  # the CRC checked too
    # Stored blocks of at most 64 KiB, each MiB starting a new one: the bytes, five bytes a
    # block, the header and the trailer.
    chunks = [min(BLOCK_BYTES, size - start) for start in range(0, size, BLOCK_BYTES)] or [0]
    chunks[-1] += padding
    blocks = sum(max(1, -(-chunk // 65_535)) for chunk in chunks)
    assert len(member) == 10 + size + padding + 5 * blocks + 8


def _folder_with_media(root: Path) -> Path:
    folder = root / "release"
    (folder / "videos").mkdir(parents=True)
    rng = random.Random(3)
    (folder / "videos" / "clip.mp4").write_bytes(rng.randbytes(3 * BLOCK_BYTES + 1_001))
    (folder / "videos" / "empty.mp4").write_bytes(b"")
    (folder / "README.md").write_text("A card\n" * 1_000)
    return folder


def test_the_archive_is_the_same_when_the_kernel_takes_short_writes(tmp_path, monkeypatch):
    """The writer writes whatever part of its pieces the kernel did not take, and a file
    mapped a block at a time gives the same bytes; the sha256 taken is the file's."""
    folder = _folder_with_media(tmp_path)
    whole = archive_write(folder, tmp_path / "whole.tar.gz", root="r", work=tmp_path / "w1")
    assert whole.sha256 == hashlib.sha256((tmp_path / "whole.tar.gz").read_bytes()).hexdigest()
    assert whole.size == (tmp_path / "whole.tar.gz").stat().st_size
    monkeypatch.setattr("annotation.releases.framing._WINDOW_BYTES", BLOCK_BYTES)
    writev = os.writev
    monkeypatch.setattr(
        "annotation.releases.framing.os.writev",
        lambda fd, pieces: writev(fd, [memoryview(b"".join(map(bytes, pieces)))[:40_000]]),
    )
    short = archive_write(folder, tmp_path / "short.tar.gz", root="r", work=tmp_path / "w2")
    assert short == whole
    assert (tmp_path / "short.tar.gz").read_bytes() == (tmp_path / "whole.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "short.tar.gz", "r:gz") as archive:
        clip = archive.extractfile("r/videos/clip.mp4")
        assert clip is not None
        assert clip.read() == (folder / "videos" / "clip.mp4").read_bytes()


def _framed(tmp_path: Path, folder: Path) -> tuple[ArchiveIndex, FolderSource]:
    """``folder``'s archive as a build frames it: the skeleton written, the index made (no
    media member's CRC known yet)."""
    with ArchiveParts(tmp_path / "parts", root="r") as parts:
        for relative in ("README.md", "videos/clip.mp4", "videos/empty.mp4"):
            if relative.startswith("videos/"):
                parts.stored(relative, (folder / relative).stat().st_size)
                continue
            part = parts.part(relative)
            part.write((folder / relative).read_bytes())
            part.close()
        index, _ = parts.frame(tmp_path / "skeleton")
    return index, FolderSource(tmp_path / "skeleton", folder)


def test_any_range_of_the_archive_is_those_bytes_of_the_whole(tmp_path):
    """The archive read from its skeleton and index is the one ``archive_write`` gives; any
    range of it, starting in a tar header, inside a media member (before and after its
    CRC-32 is known) or at a member's edge, is that slice of the whole."""
    folder = _folder_with_media(tmp_path)
    written = archive_write(folder, tmp_path / "whole.tar.gz", root="r", work=tmp_path / "w")
    whole = (tmp_path / "whole.tar.gz").read_bytes()
    index, source = _framed(tmp_path, folder)
    assert index.size == written.size == len(whole)
    clip = next(segment for segment in index.segments if segment.path == "videos/clip.mp4")
    assert clip.crc is None
    edges = [s.start for s in index.segments] + [clip.start + 5, clip.start + clip.length - 3]
    starts = sorted({0, 1, *edges, len(whole) - 1, clip.start + BLOCK_BYTES + 17})
    fresh = ArchiveIndex.from_bytes(index.to_bytes())
    for start in starts:
        for length in (1, 7, 70_000, BLOCK_BYTES + 3, len(whole)):
            got = b"".join(fresh.chunks(source, start=start, length=length))
            assert got == whole[start : start + length], (start, length)
    # A range entered inside the clip's member read it once for its CRC, now kept.
    assert next(s for s in fresh.segments if s.path == "videos/clip.mp4").crc is not None
    # Read from its start, the member takes its CRC on the way, and the index keeps it.
    digest = hashlib.sha256()
    for piece in index.pieces(source):
        digest.update(piece)
    assert digest.hexdigest() == written.sha256
    kept = ArchiveIndex.from_bytes(index.to_bytes())
    assert [s.crc for s in kept.segments if s.path] == [s.crc for s in fresh.segments if s.path]
    assert all(s.crc is not None for s in kept.segments if s.path)


@pytest.mark.parametrize(
    "size",
    [0, 1, 511, 512, 65_535, 65_536, BLOCK_BYTES - 1, BLOCK_BYTES, BLOCK_BYTES + 1, 3_146_729],
)
def test_a_stored_members_length_is_known_from_the_files_size(size):
    data = random.Random(size).randbytes(size)
    padding = -size % 512
    windows = [
        memoryview(data[at : at + 2 * BLOCK_BYTES]) for at in range(0, size, 2 * BLOCK_BYTES)
    ]
    member = b"".join(stored_member(windows, size=size, padding=padding, crc=0))
    assert stored_member_size(size, padding) == len(member)


def test_an_index_that_does_not_add_up_is_refused(tmp_path):
    index, _ = _framed(tmp_path, _folder_with_media(tmp_path))
    document = json.loads(index.to_bytes())
    assert document["segments"][0][2] == "skeleton"
    document["segments"][0][1] += 1  # one byte more: the next segment overlaps
    with pytest.raises(ValueError, match="gap or overlap"):
        ArchiveIndex.from_bytes(json.dumps(document).encode())
    media = next(row for row in json.loads(index.to_bytes())["segments"] if row[2] == "media")
    media[4] += 512  # the file's size, not its member's length
    broken = {"format": INDEX_FORMAT, "segments": [media]}
    media[0] = 0
    with pytest.raises(ValueError, match="bad length"):
        ArchiveIndex.from_bytes(json.dumps(broken).encode())
    document = json.loads(index.to_bytes())
    last = document["segments"][-1]
    assert last[2] == "skeleton"
    last[3] += 1  # its bytes said to start further into the skeleton
    with pytest.raises(ValueError, match="skips skeleton bytes"):
        ArchiveIndex.from_bytes(json.dumps(document).encode())
    with pytest.raises(ValueError, match="not an archive index"):
        ArchiveIndex.from_bytes(b'{"format": "something else", "segments": []}')


def test_a_media_file_that_changed_size_fails_the_archive(tmp_path):
    folder = _folder_with_media(tmp_path)
    index, source = _framed(tmp_path, folder)
    with open(folder / "videos" / "clip.mp4", "ab") as handle:
        handle.write(b"more")
    with pytest.raises(ValueError, match="the file holds"):
        b"".join(index.pieces(source))


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


def test_the_archive_reads_no_media_file_outside_its_folder(tmp_path):
    folder = _folder_with_media(tmp_path)
    index, source = _framed(tmp_path, folder)
    outside = tmp_path / "secret.mp4"
    clip = folder / "videos" / "clip.mp4"
    outside.write_bytes(clip.read_bytes())
    clip.unlink()
    clip.symlink_to(outside)
    with pytest.raises(ValueError, match=r"videos/clip\.mp4 is not a file of the release folder"):
        b"".join(index.pieces(source))
    document = json.loads(index.to_bytes())
    for row in document["segments"]:
        if row[2] == "media":
            row[3] = "../secret.mp4"
    with pytest.raises(ValueError, match="not in the folder"):
        ArchiveIndex.from_bytes(json.dumps(document).encode())
