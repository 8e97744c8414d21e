"""Large imports straight from the browser to the bucket (docs/curators.md, "Large files
straight to the bucket"): the server starts an S3 multipart upload under a key it chooses in
the ``uploads`` area, hands the page presigned URLs for the parts, lists the parts already
there (so a reloaded page resumes), and completes the upload, checking the object's real
size against ARBITER_MAX_UPLOAD_BYTES; the import job then reads the object like any upload.

The page holds a signed token naming the upload (project, user, key, upload id, size): the
server keeps no row per upload, and a token is good only for the curator it was given to, in
its project. The bucket's lifecycle rule removes what is abandoned (docs/operations.md)."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing

from annotation.core import storage
from annotation.core.errors import Conflict, InvalidInput, NotFound
from annotation.imports.services import UPLOADS, upload_key
from annotation.models import Project

PAIR_FILE_SUFFIXES = (".jsonl", ".ndjson", ".json")
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
# What each field of an import holds: the name its key starts with, the suffixes it takes.
FIELDS = {"file": ("pairs", PAIR_FILE_SUFFIXES), "media_archive": ("media", ARCHIVE_SUFFIXES)}
MIN_PART_BYTES = 5 * 1024**2  # S3 refuses smaller parts, the last one excepted
MAX_PARTS = 10_000  # S3's limit per upload
_SALT = "arbiter.imports.direct-upload"
TOKEN_MAX_AGE_S = 7 * 24 * 3600  # the lifecycle rule aborts older uploads (docs/operations.md)


@dataclass(frozen=True)
class DirectUpload:
    """One multipart upload, as its token names it."""

    project_id: int
    user_id: int
    field: str
    filename: str
    key: str
    upload_id: str
    size: int

    @property
    def part_bytes(self) -> int:
        return part_bytes_for(self.size)

    @property
    def part_count(self) -> int:
        return max(1, math.ceil(self.size / self.part_bytes))

    @property
    def token(self) -> str:
        return signing.dumps(
            [self.project_id, self.user_id, self.field, self.filename, self.key, self.upload_id,
             self.size],
            salt=_SALT,
        )  # fmt: skip


def part_bytes_for(size: int) -> int:
    """The parts' size: ARBITER_UPLOAD_PART_BYTES, larger when the file would need more than
    S3's 10,000 parts, never below S3's 5 MiB."""
    wanted = max(settings.ARBITER_UPLOAD_PART_BYTES, MIN_PART_BYTES)
    return max(wanted, math.ceil(size / MAX_PARTS))


def bucket_origin() -> str:
    """The origin the browser sends parts to (``scheme://host[:port]`` of a presigned URL),
    which the import page's Content-Security-Policy lets it connect to."""
    url = storage.s3_client().generate_presigned_url(
        "head_bucket", Params={"Bucket": settings.ARBITER_S3_BUCKET}, ExpiresIn=60
    )
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _check_s3() -> None:
    if not storage.is_s3():
        raise Conflict("Uploads straight to the bucket need ARBITER_STORAGE=s3.")


def _check_size(size: int, field: str) -> None:
    if size > settings.ARBITER_MAX_UPLOAD_BYTES:
        raise InvalidInput(
            f"{field}: the upload is larger than {settings.ARBITER_MAX_UPLOAD_BYTES:,} bytes."
        )


def direct_upload_start(
    *, project: Project, user: Any, field: str, filename: str, size: int
) -> DirectUpload:
    """Starts a multipart upload of ``filename`` (``size`` bytes, as the page says; checked
    again at completion) for ``field`` of an import. The caller checked that ``user`` is a
    curator of ``project``."""
    _check_s3()
    if field not in FIELDS:
        raise InvalidInput(f"field: one of {', '.join(FIELDS)}, not {field!r}.")
    prefix, suffixes = FIELDS[field]
    if not filename.lower().endswith(suffixes):
        raise InvalidInput(f"{field}: {filename[:100]!r} is not a {' or '.join(suffixes)} file.")
    if size < 1:
        raise InvalidInput(f"{field}: the file is empty.")
    _check_size(size, field)
    key = upload_key(uuid.uuid4().hex, prefix, filename)
    started = storage.s3_client().create_multipart_upload(
        Bucket=settings.ARBITER_S3_BUCKET, Key=storage.bucket_key(UPLOADS, key)
    )
    return DirectUpload(
        project.pk, user.pk, field, filename[:255], key, started["UploadId"], size
    )  # fmt: skip


def direct_upload_check(*, token: str, project: Project, user: Any) -> DirectUpload:
    """The upload a token names; NotFound unless it was given to ``user`` in ``project``
    (or it expired, or it was tampered with)."""
    try:
        fields = signing.loads(token, salt=_SALT, max_age=TOKEN_MAX_AGE_S)
        upload = DirectUpload(*fields)
    except (signing.BadSignature, TypeError, ValueError):
        raise NotFound("No such upload (it may have expired): start it again.") from None
    if upload.project_id != project.pk or upload.user_id != user.pk:
        raise NotFound("No such upload (it may have expired): start it again.")
    return upload


def direct_upload_part_urls(*, upload: DirectUpload, numbers: list[int]) -> dict[int, str]:
    """Presigned URLs to PUT the parts ``numbers`` (1-based), good for
    ARBITER_PRESIGNED_UPLOAD_S seconds."""
    _check_s3()
    bad = [n for n in numbers if not 1 <= n <= upload.part_count]
    if bad or not numbers:
        raise InvalidInput(f"parts: numbers from 1 to {upload.part_count}, not {bad or numbers}.")
    client = storage.s3_client()
    return {
        number: client.generate_presigned_url(
            "upload_part",
            Params={
                "Bucket": settings.ARBITER_S3_BUCKET,
                "Key": storage.bucket_key(UPLOADS, upload.key),
                "UploadId": upload.upload_id,
                "PartNumber": number,
            },
            ExpiresIn=settings.ARBITER_PRESIGNED_UPLOAD_S,
        )
        for number in sorted(set(numbers))
    }


def direct_upload_parts(*, upload: DirectUpload) -> list[dict[str, Any]]:
    """The parts the bucket holds (``number``, ``size``, ``etag``), for a page resuming;
    NotFound when the upload was completed or aborted."""
    _check_s3()
    from botocore.exceptions import ClientError

    client, parts = storage.s3_client(), []
    params = {
        "Bucket": settings.ARBITER_S3_BUCKET,
        "Key": storage.bucket_key(UPLOADS, upload.key),
        "UploadId": upload.upload_id,
    }
    marker = 0
    while True:
        try:
            page = client.list_parts(**params, PartNumberMarker=marker)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchUpload":
                raise NotFound("This upload is over (completed or abandoned).") from None
            raise
        parts += [
            {"number": p["PartNumber"], "size": p["Size"], "etag": p["ETag"]}
            for p in page.get("Parts", ())
        ]
        if not page.get("IsTruncated"):
            return parts
        marker = page["NextPartNumberMarker"]


def direct_upload_complete(*, upload: DirectUpload) -> int:
    """Completes the upload from the parts the bucket holds (every part 1..n, each of the
    agreed size; the ETags the bucket lists, never the page's), then checks the object's real
    size: over ARBITER_MAX_UPLOAD_BYTES, or not the size announced, it is removed and refused.
    Returns the size. Completing a completed upload again returns its size."""
    if storage.exists(UPLOADS, upload.key):
        return _checked_size(upload)
    parts = direct_upload_parts(upload=upload)
    missing = sorted(set(range(1, upload.part_count + 1)) - {p["number"] for p in parts})
    if missing:
        raise Conflict(f"Parts {_numbers(missing)} are not uploaded yet.")
    storage.s3_client().complete_multipart_upload(
        Bucket=settings.ARBITER_S3_BUCKET,
        Key=storage.bucket_key(UPLOADS, upload.key),
        UploadId=upload.upload_id,
        MultipartUpload={
            "Parts": [
                {"PartNumber": p["number"], "ETag": p["etag"]}
                for p in parts
                if p["number"] <= upload.part_count
            ]
        },
    )
    return _checked_size(upload)


def _numbers(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:10])
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def _checked_size(upload: DirectUpload) -> int:
    size = storage.size(UPLOADS, upload.key)
    try:
        _check_size(size, upload.field)
        if size != upload.size:
            raise InvalidInput(
                f"{upload.field}: the bucket holds {size:,} bytes, not the {upload.size:,}"
                " announced; upload the file again."
            )
    except InvalidInput:
        storage.delete(UPLOADS, upload.key)
        raise
    return size


def direct_upload_abort(*, upload: DirectUpload) -> None:
    """Gives up the upload: its parts (or its completed object) are removed."""
    _check_s3()
    from botocore.exceptions import ClientError

    try:
        storage.s3_client().abort_multipart_upload(
            Bucket=settings.ARBITER_S3_BUCKET,
            Key=storage.bucket_key(UPLOADS, upload.key),
            UploadId=upload.upload_id,
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":
            raise
    storage.delete(UPLOADS, upload.key)


def direct_upload_stored(*, upload: DirectUpload) -> tuple[str, int]:
    """The key and size of a completed upload, for the import job; Conflict before it is
    completed."""
    try:
        return upload.key, _checked_size(upload)
    except FileNotFoundError:
        raise Conflict(f"{upload.field}: the upload is not completed yet.") from None
