"""``manage.py migrate_storage``: an existing deployment's local files copied to the bucket
(moto's S3 server) and checked by hash; run again it skips what is there and copies again an
object whose bytes were corrupted; ``--dry-run`` copies nothing."""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.management import CommandError, call_command

from annotation.core import storage

FILES = {
    "media": {"ab/cd/abcd.png": b"png bytes", "ef/01/ef01.mp4": bytes(range(256)) * 4000},
    "releases": {"demo/1.0.0/manifest.json": b"{}", "demo/demo-1.0.0.tar.gz": b"archive"},
}


@pytest.fixture
def deployment(settings):
    """Files in the local folders, as a deployment on local disk has them (and a staging
    folder in flight, which is no file to copy)."""
    for area, files in FILES.items():
        for name, data in files.items():
            path = storage.local_root(area) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    staged = storage.local_root("media") / ".staging" / "x" / "partial"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"in flight")


def migrate(*args: str) -> str:
    out = io.StringIO()
    call_command("migrate_storage", *args, stdout=out)
    return out.getvalue()


def test_files_are_copied_verified_and_skipped_the_second_time(deployment, s3_storage):
    output = migrate("--dry-run")
    assert "would be copied: 4" in output
    assert s3_storage.keys() == []
    output = migrate()
    assert "Files checked: 4" in output
    assert "  copied: 4" in output
    assert len(s3_storage.keys("media")) == 2
    for area, files in FILES.items():
        for name, data in files.items():
            assert storage.read_bytes(area, name) == data
    # The media keys are opaque; the local files stay.
    assert not any("abcd" in key for key in s3_storage.keys("media"))
    assert (storage.local_root("media") / "ab/cd/abcd.png").exists()
    again = migrate()
    assert "already in the bucket with the right hash: 4" in again
    assert "  copied: 0" in again


def test_a_corrupted_object_is_found_and_copied_again(deployment, s3_storage):
    migrate()
    name = "ef/01/ef01.mp4"
    s3_storage.client.put_object(
        Bucket=s3_storage.bucket, Key=storage.bucket_key("media", name), Body=b"truncated"
    )
    dry = migrate("--dry-run")
    assert f"would be replaced: media/{name}" in dry
    assert storage.read_bytes("media", name) == b"truncated"
    output = migrate("--area", "media")
    assert "replaced (the object had other bytes): 1" in output
    assert "already in the bucket with the right hash: 1" in output
    data = storage.read_bytes("media", name)
    assert hashlib.sha256(data).digest() == hashlib.sha256(FILES["media"][name]).digest()


def test_without_the_bucket_configured_it_refuses(deployment):
    with pytest.raises(CommandError, match="ARBITER_STORAGE=s3"):
        migrate()
