"""A prefix of the configured bucket read as an import's media folder (docs/curators.md,
"Importing from the bucket"): each file a pair names is fetched when the import first needs
it, into a local work folder the import removes, so PyAV, Pillow and the GLB reader get a
file; a missing object is named with its bucket and key."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path, PurePosixPath

from django.conf import settings

from annotation.core import storage
from annotation.core.scratch import scratch_path
from annotation.media.services import MediaError


def bucket_import_root() -> str:
    """The bucket's prefix under which curators may name import prefixes
    (ARBITER_S3_IMPORT_ROOT): never Arbiter's own areas."""
    return str(settings.ARBITER_S3_IMPORT_ROOT).strip("/")


def bucket_import_key(prefix: str, name: str = "") -> str:
    """The bucket key of ``name`` under a curator's ``prefix`` (both checked: relative, no
    ``..``), within ARBITER_S3_IMPORT_ROOT; ValueError naming the bad part otherwise."""
    parts = [bucket_import_root()]
    for label, value in (("prefix", prefix.strip("/")), ("file", name)):
        path = PurePosixPath(value)
        if value.startswith(("/", "\\", "~")) or ".." in path.parts or "\\" in value:
            raise ValueError(f"{label} {value!r} must be a relative path without '..'")
        if value:
            parts.append(path.as_posix())
    return "/".join(part for part in parts if part)


class BucketFolder:
    """The objects under the bucket key prefix ``prefix_key`` (``bucket_import_key``'s),
    fetched one by one."""

    def __init__(self, prefix_key: str) -> None:
        self.prefix_key = prefix_key.strip("/")
        self._work: Path | None = None

    def key(self, reference: str) -> str:
        """The key of a media path (relative, without ``..``: the import checked it)."""
        return f"{self.prefix_key}/{reference}" if self.prefix_key else reference

    def fetch(self, reference: str, *, kind: str, limit: int) -> Path:
        """A local copy of the object ``reference`` names; MediaError when it is missing or
        larger than ``limit``. The copy lasts until ``close``."""
        from botocore.exceptions import ClientError

        key = self.key(reference)
        where = f"s3://{settings.ARBITER_S3_BUCKET}/{key}"
        client = storage.s3_client()
        try:
            head = client.head_object(Bucket=settings.ARBITER_S3_BUCKET, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise MediaError(f"no object {where} in the bucket") from None
            raise
        if int(head["ContentLength"]) > limit:
            raise MediaError(f"{kind} {where} is larger than {limit:,} bytes")
        if self._work is None:
            self._work = scratch_path("bucket")
            self._work.mkdir(mode=0o700)
        path = self._work / f"{uuid.uuid4().hex}{PurePosixPath(reference).suffix}"
        client.download_file(settings.ARBITER_S3_BUCKET, key, str(path))
        return path

    def close(self) -> None:
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
