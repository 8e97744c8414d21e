"""Seals on stored files (annotation/core/seals.py; docs/releases.md, "Sealed media files"): a
seal holds for the bytes it was made for until anything writes the file, replaces it or
names other bytes, at once after sealing as much as later; where the file system keeps no
extended attributes nothing is sealed."""

from __future__ import annotations

import errno
import hashlib
import os
import time

import pytest

from annotation.core import seals, storage

DATA = bytes(range(256)) * 400
SHA256 = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def sealed(tmp_path):
    path = tmp_path / "clip.mp4"
    path.write_bytes(DATA)
    assert seals.seal(path, SHA256)
    return path


def test_a_sealed_file_is_sealed_for_its_hash_alone(sealed):
    assert seals.is_sealed(sealed, SHA256)
    assert not seals.is_sealed(sealed, hashlib.sha256(b"other bytes").hexdigest())
    # Its modification time is set back, whole seconds, so that a write at once breaks it.
    mtime_ns = sealed.stat().st_mtime_ns
    assert mtime_ns % 1_000_000_000 == 0
    assert mtime_ns <= time.time_ns() - 2_000_000_000


def test_a_write_in_place_at_once_breaks_the_seal(sealed):
    with open(sealed, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\xff")
    assert not seals.is_sealed(sealed, SHA256)


@pytest.mark.parametrize("change", ["appended", "cut short", "same bytes rewritten"])
def test_any_write_breaks_the_seal(sealed, change):
    if change == "appended":
        with open(sealed, "ab") as handle:
            handle.write(b"x")
    elif change == "cut short":
        os.truncate(sealed, len(DATA) - 1)
    else:
        sealed.write_bytes(DATA)  # the same bytes: still a write, so hashed again
    assert not seals.is_sealed(sealed, SHA256)


def test_a_file_replaced_by_another_has_no_seal(sealed, tmp_path):
    other = tmp_path / "other"
    other.write_bytes(DATA)
    os.replace(other, sealed)
    assert not seals.is_sealed(sealed, SHA256)


def test_a_seal_is_never_read_through_a_link(sealed, tmp_path):
    link = tmp_path / "link.mp4"
    link.symlink_to(sealed)
    assert not seals.is_sealed(link, SHA256)
    assert not seals.seal(link, SHA256)
    assert not seals.seal(tmp_path, SHA256)  # a folder


def test_a_seal_that_does_not_parse_is_no_seal(sealed):
    os.setxattr(sealed, seals.SEAL_ATTRIBUTE, b"\xff garbage")
    assert not seals.is_sealed(sealed, SHA256)


def test_without_extended_attributes_nothing_is_sealed(tmp_path, monkeypatch):
    def unsupported(*args, **kwargs):
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(seals.os, "setxattr", unsupported)
    monkeypatch.setattr(seals.os, "getxattr", unsupported)
    path = tmp_path / "clip.mp4"
    path.write_bytes(DATA)
    assert not seals.seal(path, SHA256)
    assert not seals.is_sealed(path, SHA256)


def _stored_path(name: str):
    return storage.local_root("media") / storage.object_key("media", name)


def test_storage_seals_what_it_is_told_was_hashed_and_never_a_copy(tmp_path):
    storage.put_bytes("media", "aa/bytes.mp4", DATA, sealed_as=SHA256)
    assert seals.is_sealed(_stored_path("aa/bytes.mp4"), SHA256)
    storage.put_bytes("media", "aa/plain.mp4", DATA)
    assert not seals.is_sealed(_stored_path("aa/plain.mp4"), SHA256)
    moved = tmp_path / "moved"
    moved.write_bytes(DATA)
    storage.put_file("media", "aa/moved.mp4", moved, move=True, sealed_as=SHA256)
    assert seals.is_sealed(_stored_path("aa/moved.mp4"), SHA256)
    # A copy's bytes were not the ones hashed: not sealed.
    kept = tmp_path / "kept"
    kept.write_bytes(DATA)
    storage.put_file("media", "aa/copied.mp4", kept, sealed_as=SHA256)
    assert not seals.is_sealed(_stored_path("aa/copied.mp4"), SHA256)
