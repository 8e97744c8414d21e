"""A built release's files in the storage layer's ``releases`` area (docs/releases.md,
"Where releases are kept"): ``<slug>/<version>/<file>`` and ``<slug>/<slug>-<version>.tar.gz``,
under ARBITER_RELEASE_ROOT on local disk or in the bucket. A build made in a local work
folder is uploaded here file by file, each read back and checked against the hash the build
computed; everything that reads a release (its rows, its manifest, publishing's check, the
trainer, the command line) reads through here, on both backends alike."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpResponseRedirect

from annotation.core import storage
from annotation.models import Release
from annotation.releases.read import MANIFEST

AREA = "releases"


def file_name(release: Release, relative: str) -> str:
    """The name in the ``releases`` area of the file ``relative`` of ``release``'s folder."""
    return f"{release.project.slug}/{release.version}/{relative}"


def archive_name(release: Release) -> str:
    """The .tar.gz as a file: on the bucket from publishing on (downloads are presigned),
    and a release built before the archive was made on download (docs/releases.md)."""
    return f"{release.project.slug}/{release.archive_name}"


def skeleton_name(release: Release) -> str:
    """The archive's bytes that are not media files' (``framing``)."""
    return f"{archive_name(release)}.skeleton"


# The index is named after the archive, with this added.
INDEX_EXTENSION = ".index.json"


def index_name(release: Release) -> str:
    """The archive's index: where each media file's member goes (``framing``)."""
    return f"{archive_name(release)}{INDEX_EXTENSION}"


@dataclass(frozen=True)
class StoredReleaseFiles:
    """A release's folder read through the storage layer (``read.ReleaseFiles``)."""

    release: Release

    def text(self, relative: str) -> str:
        return storage.read_bytes(AREA, file_name(self.release, relative)).decode("utf-8")

    def lines(self, relative: str) -> Iterator[str]:
        yield from _lines(_chunks(file_name(self.release, relative)))


def _chunks(name: str) -> Iterator[bytes]:
    size = storage.size(AREA, name)
    if not size:
        return
    reader = storage.open_range(AREA, name, 0, size - 1)
    try:
        yield from reader
    finally:
        reader.close()


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    rest = b""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split(b"\n")
        for line in whole:
            yield line.decode("utf-8") + "\n"
    if rest:
        yield rest.decode("utf-8")


def is_stored(release: Release, relative: str) -> bool:
    """Whether the file ``relative`` of the release is stored: on local disk a regular file
    inside the release's folder (a link out of it is not followed)."""
    name = file_name(release, relative)
    if storage.is_s3():
        return storage.exists(AREA, name)
    folder = (storage.local_root(AREA) / file_name(release, "")).resolve()
    path = (storage.local_root(AREA) / name).resolve()
    return path.is_relative_to(folder) and path.is_file()


def stored_sha256(name: str) -> tuple[str, int]:
    """The sha256 and size of a stored file, read back as it is stored."""
    digest, size = hashlib.sha256(), 0
    for chunk in _chunks(name):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


class StoreFailed(RuntimeError):
    """A file read back from storage differs from what the build wrote."""


def release_store(
    *,
    release: Release,
    folder: Path,
    skeleton: Path,
    skeleton_sha256: str,
    index: bytes,
    manifest_sha256: str,
) -> None:
    """Uploads the built ``folder`` and the archive's ``skeleton`` (in a local work folder)
    and ``index`` as ``release``'s files, each read back and checked against the manifest's
    hash (the skeleton against ``skeleton_sha256``), then removes files of an earlier build no
    longer listed, and its archive (publishing makes the archive again). StoreFailed names a
    file that came back different."""
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    expected = {name: entry["sha256"] for name, entry in manifest["files"].items()}
    expected[MANIFEST] = manifest_sha256
    uploads = [(file_name(release, name), folder / name, sha) for name, sha in expected.items()]
    uploads.append((skeleton_name(release), skeleton, skeleton_sha256))
    for name, path, sha256 in uploads:
        storage.put_file(AREA, name, path)
        stored, _ = stored_sha256(name)
        if stored != sha256:
            raise StoreFailed(f"{name} was stored as sha256 {stored}, not {sha256}")
    storage.put_bytes(AREA, index_name(release), index)
    if storage.read_bytes(AREA, index_name(release)) != index:
        raise StoreFailed(f"{index_name(release)} was stored with other bytes")
    storage.delete(AREA, archive_name(release))
    _remove_unlisted(release, set(expected))


def _remove_unlisted(release: Release, listed: set[str]) -> None:
    prefix = file_name(release, "")
    for name in _stored_names(prefix):
        if name[len(prefix) :] not in listed:
            storage.delete(AREA, name)


def _stored_names(prefix: str) -> Iterator[str]:
    """The names of the stored files under ``prefix`` (a release's folder)."""
    if not storage.is_s3():
        root = storage.local_root(AREA)
        folder = root / prefix
        if folder.is_dir():
            yield from (p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file())
        return
    area_key = storage.bucket_key(AREA, prefix)
    paginator = storage.s3_client().get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=settings.ARBITER_S3_BUCKET, Prefix=area_key):
        for item in page.get("Contents", ()):
            yield prefix + item["Key"][len(area_key) :]


def verify_stored(release: Release) -> list[str]:
    """What differs between the stored release and its manifest (and the manifest's hash
    recorded at build time): one line per file, empty when all match. Reads every byte back."""
    try:
        data = storage.read_bytes(AREA, file_name(release, MANIFEST))
    except FileNotFoundError:
        return [f"{MANIFEST}: missing"]
    if hashlib.sha256(data).hexdigest() != release.manifest_sha256:
        return [f"{MANIFEST}: its hash differs from the one recorded at build time"]
    problems = []
    for relative, entry in sorted(json.loads(data)["files"].items()):
        try:
            sha256, size = stored_sha256(file_name(release, relative))
        except FileNotFoundError:
            problems.append(f"{relative}: missing")
            continue
        if (sha256, size) != (entry["sha256"], entry["size"]):
            problems.append(f"{relative}: differs from the manifest")
    return problems


def release_copy_out(release: Release, dest: Path, manifest: dict[str, Any]) -> None:
    """Writes the release's folder (every file the manifest lists, and the manifest) into
    ``dest``, for the command line."""
    for relative in [MANIFEST, *manifest["files"]]:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with storage.local_copy(AREA, file_name(release, relative)) as path:
            shutil.copyfile(path, target)


def location(name: str) -> str:
    """Where a stored release file is, for an operator: its path, or its ``s3://`` URL."""
    if storage.is_s3():
        return f"s3://{settings.ARBITER_S3_BUCKET}/{storage.bucket_key(AREA, name)}"
    return str(storage.local_root(AREA) / name)


def presigned_download(name: str, *, filename: str, content_type: str) -> HttpResponseRedirect:
    """A redirect to a presigned GET of the stored file ``name`` (on the bucket), good for
    ARBITER_PRESIGNED_DOWNLOAD_S seconds, served as a download called ``filename``."""
    url = storage.s3_client().generate_presigned_url(
        "get_object",
        Params={
            "Bucket": settings.ARBITER_S3_BUCKET,
            "Key": storage.bucket_key(AREA, name),
            "ResponseContentDisposition": f'attachment; filename="{filename}"',
            "ResponseContentType": content_type,
        },
        ExpiresIn=settings.ARBITER_PRESIGNED_DOWNLOAD_S,
    )
    return HttpResponseRedirect(url)
