"""The storage layer on both backends: the same calls store, measure, read ranges of, copy
out and delete a file on local disk and in the bucket (moto's server)."""

from __future__ import annotations

import hashlib

import pytest
from django.core.exceptions import ImproperlyConfigured

from annotation.core import storage

DATA = bytes(range(256)) * 1000
NAME = "ab/cd/abcd0123.mp4"


@pytest.fixture(params=["local", "s3"])
def backend(request):
    if request.param == "s3":
        return request.getfixturevalue("s3_storage")
    return None


def test_a_file_goes_in_and_comes_out_whole_and_in_ranges(backend, tmp_path):
    source = tmp_path / "clip.mp4"
    source.write_bytes(DATA)
    assert not storage.exists("media", NAME)
    storage.put_file("media", NAME, source)
    assert storage.exists("media", NAME)
    assert storage.size("media", NAME) == len(DATA)
    reader = storage.open_range("media", NAME, 1000, 70_000)
    try:
        assert b"".join(reader) == DATA[1000:70_001]
    finally:
        reader.close()
    assert storage.read_bytes("media", NAME) == DATA
    with storage.local_copy("media", NAME) as path:
        copied = path
        assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(DATA).digest()
    assert copied.exists() == (backend is None)  # a download is removed afterwards
    storage.delete("media", NAME)
    assert not storage.exists("media", NAME)
    with pytest.raises(FileNotFoundError):
        storage.size("media", NAME)
    with pytest.raises(FileNotFoundError), storage.local_copy("media", NAME):
        pass
    with pytest.raises(FileNotFoundError):
        storage.open_range("media", NAME, 0, 10)


def test_media_keys_in_the_bucket_name_no_content_hash(s3_storage, tmp_path):
    sha256 = hashlib.sha256(DATA).hexdigest()
    name = f"{sha256[:2]}/{sha256[2:4]}/{sha256}.png"
    storage.put_bytes("media", name, DATA)
    [key] = s3_storage.keys("media")
    assert sha256[:16] not in key
    assert key.startswith(f"{s3_storage.prefix}/media/")
    assert key.endswith(".png")
    # Other areas keep their names: a release's files are named for researchers.
    storage.put_bytes("releases", "demo/1.0.0/manifest.json", b"{}")
    assert s3_storage.keys("releases") == [f"{s3_storage.prefix}/releases/demo/1.0.0/manifest.json"]
    assert storage.storage_for("releases").exists("demo/1.0.0/manifest.json")
    assert not (tmp_path / "media").exists()


def test_local_storage_keeps_the_folders_of_today(settings):
    storage.put_bytes("media", NAME, DATA)
    assert (settings.MEDIA_ROOT / NAME).read_bytes() == DATA
    assert storage.storage_for("media").path(NAME) == str(settings.MEDIA_ROOT / NAME)
    assert list(storage.local_names("media")) == [NAME]


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", ""])
def test_names_that_leave_the_area_are_refused(name):
    with pytest.raises(ValueError, match="not a file name"):
        storage.object_key("media", name)


def test_an_unknown_area_is_refused():
    with pytest.raises(ValueError, match="No storage area called 'cache'"):
        storage.storage_for("cache")


def test_s3_without_a_bucket_is_refused(monkeypatch):
    import importlib

    import config.settings

    monkeypatch.setenv("ARBITER_STORAGE", "s3")
    monkeypatch.delenv("ARBITER_S3_BUCKET", raising=False)
    try:
        with pytest.raises(ImproperlyConfigured, match="ARBITER_S3_BUCKET"):
            importlib.reload(config.settings)
    finally:
        monkeypatch.undo()
        importlib.reload(config.settings)
