"""The bucket a media benchmark writes to with ``--storage s3``: the S3-compatible server
named by ``ARBITER_S3_ENDPOINT_URL`` and ``ARBITER_S3_BUCKET`` when set (MinIO, say, with
boto3's AWS_* credentials), else moto's server mode started on a free loopback port
(tests/s3_server.py), which is slower than a real one: its figures are a floor."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def bucket_environment() -> tuple[Any, dict[str, str]]:
    """The server started (None for one named by the environment) and the variables that
    point Arbiter at its bucket, under a new prefix."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    if os.environ.get("ARBITER_S3_ENDPOINT_URL") and os.environ.get("ARBITER_S3_BUCKET"):
        return None, {"ARBITER_STORAGE": "s3", "ARBITER_S3_PREFIX": prefix}
    sys.path.insert(0, str(ROOT))
    import boto3

    from tests.s3_server import BUCKET, CREDENTIALS, S3Server

    server = S3Server()
    boto3.client("s3", endpoint_url=server.url, **_boto_credentials(CREDENTIALS)).create_bucket(
        Bucket=BUCKET
    )
    return server, {
        "ARBITER_STORAGE": "s3",
        "ARBITER_S3_BUCKET": BUCKET,
        "ARBITER_S3_ENDPOINT_URL": server.url,
        "ARBITER_S3_PREFIX": prefix,
        **CREDENTIALS,
    }


def _boto_credentials(credentials: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": credentials["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": credentials["AWS_SECRET_ACCESS_KEY"],
        "region_name": credentials["AWS_DEFAULT_REGION"],
    }


def use_storage(environment: dict[str, str]) -> None:
    """Points this process (already set up) and the processes it starts at a storage:
    ``{}`` for local disk, ``bucket_environment()``'s variables for the bucket."""
    from django.conf import settings

    os.environ.update(environment)
    if not environment:
        os.environ["ARBITER_STORAGE"] = "local"
    for name, value in {"ARBITER_STORAGE": "local", **environment}.items():
        setattr(settings, name, value)


def empty_store() -> None:
    """Removes every media file stored, so that the next run writes its files again."""
    import shutil

    from django.conf import settings

    from annotation.core import storage

    if not storage.is_s3():
        for entry in Path(settings.MEDIA_ROOT).glob("[0-9a-f][0-9a-f]"):
            shutil.rmtree(entry, ignore_errors=True)
        return
    client = storage.s3_client()
    prefix = storage.area_prefix("media") + "/"
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=settings.ARBITER_S3_BUCKET, Prefix=prefix
    )
    for page in pages:
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=settings.ARBITER_S3_BUCKET, Delete={"Objects": keys})
