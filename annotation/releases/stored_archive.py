"""A built release's .tar.gz, made from its skeleton, its index and its folder whenever it is
read (docs/releases.md, "The archive"), on local disk or on the bucket alike: hashed when the
release is published (and on the bucket uploaded then as one object, so that downloads stay
presigned), and streamed with ranges to a download from local disk."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from annotation.core import storage
from annotation.models import Release
from annotation.releases.framing import (
    ArchiveIndex,
    ArchiveSource,
    Digest,
    FolderSource,
    block_windows,
    write_pieces,
)
from annotation.releases.stored import (
    AREA,
    INDEX_EXTENSION,
    StoreFailed,
    archive_name,
    file_name,
    index_name,
    skeleton_name,
    stored_sha256,
)


class StoredSource:
    """An archive's bytes read from the bucket: its skeleton by ranges, each media file as
    it arrives (``framing.ArchiveSource``)."""

    def __init__(self, release: Release) -> None:
        self._release = release

    def skeleton(self, start: int, length: int) -> Iterator[bytes]:
        reader = storage.open_range(AREA, skeleton_name(self._release), start, start + length - 1)
        try:
            yield from reader
        finally:
            reader.close()

    def media(self, path: str) -> Iterator[memoryview]:
        reader = storage.open_stream(AREA, file_name(self._release, path))
        try:
            yield from block_windows(reader)
        finally:
            reader.close()


def archive_source(release: Release) -> ArchiveSource:
    if storage.is_s3():
        return StoredSource(release)
    return FolderSource(storage.local_root(AREA) / skeleton_name(release), release.folder)


def archive_index(release: Release) -> ArchiveIndex | None:
    """The release's archive index; None for a release whose archive was written whole at
    build (before the archive was made on download), or one not built."""
    try:
        data = storage.read_bytes(AREA, index_name(release))
    except FileNotFoundError:
        return None
    return ArchiveIndex.from_bytes(data)


def archive_publish(release: Release) -> Digest:
    """The archive's sha256 and size, taken when ``release`` is published by reading it once
    whole; each media member's CRC-32, taken on the way, is kept in the index so that a
    download's range can start anywhere. On the bucket the archive is uploaded meanwhile, then
    read back and checked (StoreFailed). A release built with its archive whole keeps it."""
    index = archive_index(release)
    if index is None:
        return Digest(release.archive_sha256, release.archive_size)
    for segment in index.segments:
        segment.crc = None  # taken afresh from the files publishing checks, never trusted
    source = archive_source(release)
    digest, size = hashlib.sha256(), 0
    if storage.is_s3():

        def hashed() -> Iterator[bytes]:
            nonlocal size
            for chunk in index.chunks(source, start=0, length=index.size):
                digest.update(chunk)
                size += len(chunk)
                yield chunk

        storage.put_stream(AREA, archive_name(release), hashed())
        stored, _ = stored_sha256(archive_name(release))
        if stored != digest.hexdigest():
            raise StoreFailed(f"{archive_name(release)} was stored as sha256 {stored}")
    else:
        for piece in index.pieces(source):
            digest.update(piece)
            size += len(piece)
    if size != index.size:
        raise ValueError(f"the archive came to {size} bytes, its index says {index.size}")
    storage.put_bytes(AREA, index_name(release), index.to_bytes())
    return Digest(digest.hexdigest(), size)


def archive_write_out(release: Release, target: Path) -> Digest:
    """The release's archive written to the local file ``target`` (``create_release
    --out``): made from its index, or copied when it is stored whole."""
    index = archive_index(release)
    if index is None:
        with storage.local_copy(AREA, archive_name(release)) as path:
            return write_pieces(target, _file_blocks(path))
    return write_pieces(target, index.pieces(archive_source(release)))


def _file_blocks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while block := handle.read(1024 * 1024):
            yield block


def published_archives_migrate(*, dry_run: bool) -> tuple[list[str], list[str]]:
    """For ``migrate_storage``, once the ``releases`` area is copied: each published release
    whose archive is made on download from local disk gets its archive stored in the bucket,
    as publishing stores it there (the bucket's downloads are presigned), made from the local
    skeleton and folder, read back and checked against the sha256 recorded at publishing. An
    archive there already with that sha256 is skipped. Returns what was (``dry_run``: would
    be) stored and what failed, a line each."""
    made: list[str] = []
    failed: list[str] = []
    local = storage.local_root(AREA)
    if not any(local.glob(f"*/*.tar.gz{INDEX_EXTENSION}")):  # no release made on download here
        return made, failed
    for release in Release.objects.filter(status=Release.Status.PUBLISHED).select_related(
        "project"
    ):
        index_path = local / index_name(release)
        name = archive_name(release)
        if not index_path.is_file() or _stored_with(name, release.archive_sha256):
            continue
        if dry_run:
            made.append(name)
            continue
        try:
            index = ArchiveIndex.from_bytes(index_path.read_bytes())
            source = FolderSource(local / skeleton_name(release), release.folder)
            storage.put_stream(AREA, name, index.chunks(source, start=0, length=index.size))
        except (OSError, ValueError) as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if _stored_with(name, release.archive_sha256):
            made.append(name)
        else:
            failed.append(f"{name}: read back with another sha256 than the published one")
    return made, failed


def _stored_with(name: str, sha256: str) -> bool:
    try:
        return stored_sha256(name)[0] == sha256
    except FileNotFoundError:
        return False
