"""Imports from a prefix of the configured bucket (as Label Studio's and CVAT's cloud
storages read a bucket): a curator names a prefix under ARBITER_S3_IMPORT_ROOT and the pairs
file in it (JSONL, JSON, an Omni-RewardBench task file, an MMRB2 file); the file is copied
within the bucket to the ``uploads`` area, and the job's worker reads the media its pairs
name from the prefix (``bucket_folder``). A missing object is named with its key."""

from __future__ import annotations

import uuid

from django.conf import settings

from annotation.core import storage
from annotation.core.errors import Conflict, InvalidInput
from annotation.imports.bucket_folder import bucket_import_key, bucket_import_root
from annotation.imports.direct import PAIR_FILE_SUFFIXES
from annotation.imports.services import (
    UPLOADS,
    StoredUpload,
    import_job_submit_stored,
    upload_key,
)
from annotation.models import ImportJob, Project


def _check_outside_areas(key: str) -> None:
    """Arbiter's own objects (media, uploads, releases, checkpoints) are never an import's."""
    own = "/".join(part for part in (settings.ARBITER_S3_PREFIX.strip("/"),) if part)
    for area in storage.AREAS:
        area_prefix = f"{own}/{area}" if own else area
        if key == area_prefix or key.startswith(f"{area_prefix}/"):
            raise InvalidInput(
                f"prefix: {key!r} lies in Arbiter's own storage; name one under"
                f" ARBITER_S3_IMPORT_ROOT ({bucket_import_root() or 'the bucket'})."
            )


def import_job_submit_bucket(*, project: Project, user, prefix: str, filename: str) -> ImportJob:
    """Imports ``filename`` from the bucket prefix ``prefix`` (its media paths read under the
    same prefix) in a Celery task. InvalidInput naming the field, or the missing object."""
    from botocore.exceptions import ClientError

    if not storage.is_s3():
        raise Conflict("Imports from the bucket need ARBITER_STORAGE=s3.")
    if not filename.lower().endswith(PAIR_FILE_SUFFIXES):
        raise InvalidInput(f"file: {filename[:100]!r} is not a .jsonl or .json file.")
    try:
        media_prefix = bucket_import_key(prefix)
        source = bucket_import_key(prefix, filename)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    _check_outside_areas(source)
    bucket, client = settings.ARBITER_S3_BUCKET, storage.s3_client()
    try:
        size = int(client.head_object(Bucket=bucket, Key=source)["ContentLength"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            raise InvalidInput(f"file: no object s3://{bucket}/{source} in the bucket") from None
        raise
    key = upload_key(uuid.uuid4().hex, "pairs", filename)
    client.copy({"Bucket": bucket, "Key": source}, bucket, storage.bucket_key(UPLOADS, key))
    job = import_job_submit_stored(
        project=project,
        user=user,
        upload=StoredUpload(key=key, size=size, filename=f"s3://{bucket}/{source}"),
        media_bucket_prefix=media_prefix,
    )
    return job
