"""Where Arbiter keeps the files it writes: local folders (the default) or an S3-compatible
bucket (``ARBITER_STORAGE=s3``; docs/operations.md, "Object storage").

Files live in four areas: ``media`` (originals, served copies, posters and rendered views),
``uploads`` (import uploads in flight), ``releases`` (release folders' files and archives) and
``checkpoints`` (reward-model checkpoints). Callers name a file by its *name* in its area (a
media file's ``Media.path_for``, a release's ``<slug>/<version>/...``), never by a path on
disk, and read and write it through the helpers here, which work the same on both backends:
a worker never assumes a local path; ``local_copy`` gives a decoder (PyAV, Pillow,
``datasets``) a file for as long as it needs one. On the bucket, each area lies under
``<ARBITER_S3_PREFIX>/<area>/``, and a media file's object key is an HMAC of its name (which
holds its content hash), so no key can be looked up against public benchmark files.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage
from django.utils.crypto import salted_hmac

from annotation.core import seals
from annotation.core.scratch import scratch_path

AREAS = ("media", "uploads", "releases", "checkpoints")
# Areas whose names hold content hashes: their object keys are opaque.
_OPAQUE_AREAS = frozenset({"media"})
_KEY_PURPOSE = "arbiter.storage.object-key"
CHUNK_BYTES = 256 * 1024
# Objects above this go up in parts (boto3's managed transfer), several at once.
_MULTIPART_BYTES = 16 * 1024 * 1024


def is_s3() -> bool:
    """Whether files live in the bucket (``ARBITER_STORAGE=s3``)."""
    return bool(settings.ARBITER_STORAGE == "s3")


def _check_area(area: str) -> None:
    if area not in AREAS:
        raise ValueError(f"No storage area called {area!r} (one of {', '.join(AREAS)})")


def local_root(area: str) -> Path:
    """The local folder of ``area`` (used with ``ARBITER_STORAGE=local``, and read from by
    ``manage.py migrate_storage``)."""
    _check_area(area)
    media = Path(settings.MEDIA_ROOT)
    return {
        "media": media,
        "uploads": media / ".uploads",
        "releases": Path(settings.ARBITER_RELEASE_ROOT),
        "checkpoints": Path(settings.ARBITER_CHECKPOINT_ROOT),
    }[area]


def object_key(area: str, name: str) -> str:
    """The key of ``name`` within its area on the backend: the name itself, except in the
    media area on the bucket, where it is an HMAC of the name (its extension kept)."""
    _check_area(area)
    _check_name(name)
    if area not in _OPAQUE_AREAS or not is_s3():
        return name
    digest = salted_hmac(
        _KEY_PURPOSE, name, secret=settings.ARBITER_STORAGE_KEY_SECRET, algorithm="sha256"
    ).hexdigest()
    suffix = PurePosixPath(name).suffix
    return f"{digest[:2]}/{digest}{suffix}"


def _check_name(name: str) -> None:
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or "\\" in name or "\x00" in name:
        raise ValueError(f"{name!r} is not a file name within a storage area")


def area_prefix(area: str) -> str:
    """The bucket's prefix of ``area``: ``<ARBITER_S3_PREFIX>/<area>``."""
    return "/".join(part for part in (settings.ARBITER_S3_PREFIX.strip("/"), area) if part)


def bucket_key(area: str, name: str) -> str:
    """The full key in the bucket of ``name`` in ``area``."""
    return f"{area_prefix(area)}/{object_key(area, name)}"


def _client_config() -> Any:
    from botocore.config import Config

    return Config(
        # S3-compatible servers refuse the CRC checksums boto3 adds by default.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3={"addressing_style": "path" if settings.ARBITER_S3_ENDPOINT_URL else "auto"},
        # Presigned URLs (release downloads, the import page's parts) signed with SigV4, which
        # every region takes; botocore would presign SigV2 in us-east-1.
        signature_version="s3v4",
        retries={"max_attempts": 5, "mode": "standard"},
        max_pool_connections=32,
    )


def _s3_settings() -> tuple[str, str, str, str, str]:
    return (
        settings.ARBITER_S3_ENDPOINT_URL,
        settings.AWS_ACCESS_KEY_ID,
        settings.AWS_SECRET_ACCESS_KEY,
        settings.AWS_DEFAULT_REGION,
        settings.ARBITER_S3_BUCKET,
    )


def s3_client() -> Any:
    """A boto3 S3 client built from the settings (shared: boto3's clients are thread-safe),
    for presigning, multipart uploads and ranged reads."""
    return _client(*_s3_settings())


@functools.lru_cache(maxsize=8)
def _client(endpoint: str, key_id: str, secret: str, region: str, bucket: str) -> Any:
    import boto3

    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint or None,
        aws_access_key_id=key_id or None,
        aws_secret_access_key=secret or None,
        region_name=region or None,
        config=_client_config(),
    )


def storage_for(area: str) -> Storage:
    """Django's storage of ``area``: a ``FileSystemStorage`` on its local folder, or
    django-storages' ``S3Storage`` under its prefix. Its names are ``object_key``'s."""
    _check_area(area)
    if not is_s3():
        return _local_storage(str(local_root(area)))
    return _s3_storage(area_prefix(area), *_s3_settings())


@functools.lru_cache(maxsize=16)
def _local_storage(root: str) -> Storage:
    return FileSystemStorage(location=root)


@functools.lru_cache(maxsize=16)
def _s3_storage(
    location: str, endpoint: str, key_id: str, secret: str, region: str, bucket: str
) -> Storage:
    from storages.backends.s3 import S3Storage

    return S3Storage(
        bucket_name=bucket,
        location=location,
        endpoint_url=endpoint or None,
        access_key=key_id or None,
        secret_key=secret or None,
        region_name=region or None,
        client_config=_client_config(),
        file_overwrite=True,
        default_acl=None,
        querystring_auth=True,
    )


def _local_path(area: str, name: str) -> Path:
    return local_root(area) / object_key(area, name)


def _missing(area: str, name: str) -> FileNotFoundError:
    return FileNotFoundError(f"{area} file {name!r} is not in storage")


def _is_not_found(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    return code in ("404", "NoSuchKey", "NotFound")


def put_file(
    area: str, name: str, local_path: Path, *, move: bool = False, sealed_as: str | None = None
) -> None:
    """Stores the file at ``local_path`` as ``name``, whole or not at all. With ``move`` the
    local file is gone afterwards (renamed into place on disk when it can be); without, it is
    left where it is (its owner removes it). ``sealed_as``, the sha256 its writer took of its
    bytes, seals a file renamed into place (annotation/core/seals.py); a copy is not sealed."""
    if is_s3():
        from boto3.s3.transfer import TransferConfig

        transfer = TransferConfig(multipart_threshold=_MULTIPART_BYTES, max_concurrency=4)
        s3_client().upload_file(
            str(local_path), settings.ARBITER_S3_BUCKET, bucket_key(area, name), Config=transfer
        )
        if move:
            local_path.unlink()
        return
    final = _local_path(area, name)
    if move:
        final.parent.mkdir(parents=True, exist_ok=True)
        if sealed_as is not None:
            seals.seal(local_path, sealed_as)  # the seal goes with the file it is renamed
        try:
            os.replace(local_path, final)  # the same file system: staged beside it
            return
        except OSError:
            pass
    _write_atomically(final, lambda partial: shutil.copyfile(local_path, partial))
    if move:
        local_path.unlink()


class _ChunkReader(io.RawIOBase):
    """An iterator of byte chunks as a binary file read from its start (an upload's body)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._held = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._held:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._held = chunk
        taken = self._held[: len(buffer)]
        buffer[: len(taken)] = taken
        self._held = self._held[len(taken) :]
        return len(taken)


def put_stream(area: str, name: str, chunks: Iterable[bytes]) -> None:
    """Stores the bytes of ``chunks`` as ``name``, whole or not at all, never all in memory
    (on the bucket a multipart upload as they come)."""
    if is_s3():
        from boto3.s3.transfer import TransferConfig

        transfer = TransferConfig(multipart_threshold=_MULTIPART_BYTES, max_concurrency=1)
        s3_client().upload_fileobj(
            io.BufferedReader(_ChunkReader(chunks), buffer_size=1024 * 1024),
            settings.ARBITER_S3_BUCKET,
            bucket_key(area, name),
            Config=transfer,
        )
        return

    def write(partial: Path) -> None:
        with open(partial, "wb") as out:
            for chunk in chunks:
                out.write(chunk)

    _write_atomically(_local_path(area, name), write)


def _write_atomically(
    final: Path, write: Callable[[Path], object], *, sealed_as: str | None = None
) -> None:
    """``write`` into a partial file beside ``final``, synced (and sealed as ``sealed_as``
    when given), then renamed over it."""
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(f".{final.name}.{uuid.uuid4().hex}")
    try:
        write(partial)
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        if sealed_as is not None:
            seals.seal(partial, sealed_as)
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)


def work_folder(area: str) -> Path:
    """A new local folder for files on their way into ``area`` (created; the caller removes
    it): beside the area's files on disk, so that ``put_file(move=True)`` renames, or in the
    scratch folder with the bucket. A worker sweeps what a killed job left there when it
    starts (annotation/core/scratch.py)."""
    if is_s3():
        folder = scratch_path(f"{area}-staging")
    else:
        folder = local_root(area) / ".staging" / uuid.uuid4().hex
    folder.mkdir(parents=True, mode=0o700)
    return folder


def put_bytes(area: str, name: str, data: bytes, *, sealed_as: str | None = None) -> None:
    """Stores ``data`` as ``name``, whole or not at all; on disk sealed as ``sealed_as``, the
    sha256 the caller took of ``data``, when given (annotation/core/seals.py)."""
    if is_s3():
        s3_client().put_object(
            Bucket=settings.ARBITER_S3_BUCKET, Key=bucket_key(area, name), Body=data
        )
        return
    _write_atomically(
        _local_path(area, name), lambda partial: partial.write_bytes(data), sealed_as=sealed_as
    )


def exists(area: str, name: str) -> bool:
    if not is_s3():
        return _local_path(area, name).is_file()
    try:
        _head_size(settings.ARBITER_S3_BUCKET, bucket_key(area, name), area, name)
    except FileNotFoundError:
        return False
    return True


def size(area: str, name: str) -> int:
    """The size of ``name`` in bytes; ``FileNotFoundError`` when it is not stored. On the
    bucket, one ``HeadObject``; a media file's size is then remembered by the process (a
    name in that area always holds the same bytes), so serving its next range costs only
    the ranged ``GetObject``."""
    if not is_s3():
        try:
            return _local_path(area, name).stat().st_size
        except (FileNotFoundError, NotADirectoryError):
            raise _missing(area, name) from None
    key = bucket_key(area, name)
    if area in _CONTENT_NAMED_AREAS:
        return _remembered_size(settings.ARBITER_S3_BUCKET, key, area, name)
    return _head_size(settings.ARBITER_S3_BUCKET, key, area, name)


# Areas whose names are their contents' hashes: a name never holds other bytes.
_CONTENT_NAMED_AREAS = frozenset({"media"})


def _head_size(bucket: str, key: str, area: str, name: str) -> int:
    from botocore.exceptions import ClientError

    try:
        head = s3_client().head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if _is_not_found(exc):
            raise _missing(area, name) from None
        raise
    return int(head["ContentLength"])


# A missing object raises, and is not remembered.
_remembered_size = functools.lru_cache(maxsize=65_536)(_head_size)


def delete(area: str, name: str) -> None:
    """Removes ``name``; nothing happens when it is not there."""
    if is_s3():
        s3_client().delete_object(Bucket=settings.ARBITER_S3_BUCKET, Key=bucket_key(area, name))
        _remembered_size.cache_clear()  # rare: forgetting them all costs a HEAD each
    else:
        _local_path(area, name).unlink(missing_ok=True)


class RangeReader:
    """Bytes ``start`` to ``end`` (both included) of a stored file, chunk by chunk; closed by
    whoever streams it (Django's response calls ``close()``), also when never read."""

    def __init__(self, source: Any, length: int, *, start: int | None = None) -> None:
        self._source = source
        self._start = start  # a file to seek in; a ranged GetObject's body starts there
        self._left = length

    def __iter__(self) -> Iterator[bytes]:
        if self._start is not None:
            self._source.seek(self._start)
        while self._left > 0:
            chunk = self._source.read(min(CHUNK_BYTES, self._left))
            if not chunk:
                return  # the object shrank under us; the client sees a short body
            self._left -= len(chunk)
            yield chunk

    def close(self) -> None:
        self._source.close()


def open_range(area: str, name: str, start: int, end: int) -> RangeReader:
    """An iterator over bytes ``start`` to ``end`` (included) of ``name``: on the bucket one
    ranged ``GetObject`` streamed as it arrives (never the whole object first), on disk the
    file read from ``start``. ``FileNotFoundError`` when it is not stored."""
    length = end - start + 1
    if not is_s3():
        try:
            return RangeReader(open(_local_path(area, name), "rb"), length, start=start)
        except (FileNotFoundError, NotADirectoryError):
            raise _missing(area, name) from None
    from botocore.exceptions import ClientError

    try:
        answer = s3_client().get_object(
            Bucket=settings.ARBITER_S3_BUCKET,
            Key=bucket_key(area, name),
            Range=f"bytes={start}-{end}",
        )
    except ClientError as exc:
        if _is_not_found(exc):
            raise _missing(area, name) from None
        raise
    return RangeReader(answer["Body"], length)


def open_stream(area: str, name: str) -> RangeReader:
    """The whole of ``name`` chunk by chunk (one ``GetObject`` on the bucket);
    ``FileNotFoundError`` when it is not stored."""
    length = size(area, name)
    if length == 0:
        return RangeReader(_Empty(), 0)
    return open_range(area, name, 0, length - 1)


class _Empty:
    def read(self, _: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


def read_bytes(area: str, name: str) -> bytes:
    """The whole of ``name`` (for files small enough to hold: an image, a poster)."""
    if not is_s3():
        try:
            return _local_path(area, name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise _missing(area, name) from None
    from botocore.exceptions import ClientError

    try:
        answer = s3_client().get_object(
            Bucket=settings.ARBITER_S3_BUCKET, Key=bucket_key(area, name)
        )
    except ClientError as exc:
        if _is_not_found(exc):
            raise _missing(area, name) from None
        raise
    with answer["Body"] as body:
        return bytes(body.read())


@contextmanager
def local_copy(area: str, name: str) -> Iterator[Path]:
    """A local path holding ``name`` for the length of the ``with``: the file itself on
    disk, a download into the scratch folder (removed afterwards) from the bucket.
    ``FileNotFoundError`` when it is not stored."""
    if not is_s3():
        path = _local_path(area, name)
        if not path.is_file():
            raise _missing(area, name)
        yield path
        return
    from botocore.exceptions import ClientError

    folder = scratch_path("copy")
    folder.mkdir(mode=0o700)
    try:
        path = folder / PurePosixPath(name).name
        try:
            s3_client().download_file(settings.ARBITER_S3_BUCKET, bucket_key(area, name), str(path))
        except ClientError as exc:
            if _is_not_found(exc):
                raise _missing(area, name) from None
            raise
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def accel_path(area: str, name: str) -> str:
    """What follows the web server's internal location in ``X-Accel-Redirect`` for ``name``:
    its path under the area's folder on disk, or its full key in the bucket (the location
    then proxies the bucket; docs/operations.md, "Media through the web server")."""
    return bucket_key(area, name) if is_s3() else object_key(area, name)


def local_names(area: str) -> Iterator[str]:
    """The names of the files in ``area``'s local folder, leaving out work in flight (names
    starting with a dot: staging folders, partial writes), sorted."""
    root = local_root(area)
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        yield relative.as_posix()
