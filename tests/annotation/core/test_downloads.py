"""Streamed downloads with range requests (annotation/core/downloads.py; docs/releases.md,
"Downloads")."""

from __future__ import annotations

import hashlib

import pytest
from django.test import RequestFactory

from annotation.core import downloads, storage
from annotation.core.downloads import ByteRange, Unsatisfiable, parse_range, ranged_file_response

# Closing a response sends request_finished, on which Django closes stale database connections.
pytestmark = pytest.mark.django_db

BODY = bytes(range(256)) * 40  # 10,240 bytes, each offset recognisable
SHA = hashlib.sha256(BODY).hexdigest()


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "demo-1.0.0.tar.gz"
    path.write_bytes(BODY)
    return path


def get(archive, **headers):
    request = RequestFactory().get("/download", headers=headers)
    return ranged_file_response(
        request,
        archive,
        filename="demo-1.0.0.tar.gz",
        content_type="application/gzip",
        etag_value=SHA,
    )


def body(response) -> bytes:
    content = b"".join(response.streaming_content)
    response.close()
    return content


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-99", ByteRange(0, 99)),
        ("bytes=100-", ByteRange(100, 999)),
        ("bytes=-10", ByteRange(990, 999)),
        ("bytes=-5000", ByteRange(0, 999)),  # a suffix longer than the file: all of it
        ("bytes=900-5000", ByteRange(900, 999)),  # an end past the file is clipped
        ("bytes=999-999", ByteRange(999, 999)),
        ("Bytes = 1-2", ByteRange(1, 2)),
        # 5,000 digits, more than Python reads as an int: past any file, or leading zeros
        ("bytes=0-" + "9" * 5000, ByteRange(0, 999)),
        ("bytes=-" + "9" * 5000, ByteRange(0, 999)),
        ("bytes=" + "0" * 4999 + "5-" + "0" * 4999 + "9", ByteRange(5, 9)),
    ],
)
def test_parse_range(header, expected):
    assert parse_range(header, 1000) == expected


@pytest.mark.parametrize(
    "header",
    ["bytes=0-1,5-6", "items=0-1", "bytes=-", "bytes=5-1", "bytes=a-b", "0-1", "bytes=1-2-3"],
)
def test_ranges_that_are_ignored_send_the_whole_file(header):
    assert parse_range(header, 1000) is None


@pytest.mark.parametrize(
    "header", ["bytes=1000-", "bytes=5000-6000", "bytes=-0", "bytes=" + "9" * 5000 + "-"]
)
def test_ranges_past_the_end_are_unsatisfiable(header):
    with pytest.raises(Unsatisfiable):
        parse_range(header, 1000)


def test_an_empty_file_satisfies_no_suffix_range():
    with pytest.raises(Unsatisfiable):
        parse_range("bytes=-1", 0)


def test_without_range_the_whole_file_streams_with_its_etag(archive):
    response = get(archive)
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Length"] == str(len(BODY))
    assert response["Accept-Ranges"] == "bytes"
    assert response["ETag"] == f'"{SHA}"'
    assert response["Content-Type"] == "application/gzip"
    assert response["Content-Disposition"] == 'attachment; filename="demo-1.0.0.tar.gz"'
    assert response["Cache-Control"] == "private, no-transform"
    assert hashlib.sha256(body(response)).hexdigest() == SHA


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [("bytes=10-19", 10, 19), ("bytes=10000-", 10000, 10239), ("bytes=-3", 10237, 10239)],
)
def test_a_range_answers_206_with_just_those_bytes(archive, header, start, end):
    response = get(archive, Range=header)
    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes {start}-{end}/{len(BODY)}"
    assert response["Content-Length"] == str(end - start + 1)
    assert body(response) == BODY[start : end + 1]


def test_a_range_past_the_end_answers_416_with_the_size(archive):
    response = get(archive, Range="bytes=20000-")
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{len(BODY)}"


def test_if_range_with_the_current_etag_serves_the_range(archive):
    response = get(archive, Range="bytes=0-9", If_Range=f'"{SHA}"')
    assert response.status_code == 206
    assert body(response) == BODY[:10]


@pytest.mark.parametrize("validator", ['"another-hash"', "Tue, 01 Dec 2026 12:00:00 GMT"])
def test_if_range_that_no_longer_holds_sends_the_whole_file(archive, validator):
    response = get(archive, Range="bytes=0-9", If_Range=validator)
    assert response.status_code == 200
    assert body(response) == BODY


def test_if_none_match_with_the_current_etag_answers_304(archive):
    response = get(archive, If_None_Match=f'"{SHA}"')
    assert response.status_code == 304
    assert response["ETag"] == f'"{SHA}"'


def test_a_large_file_is_read_in_chunks_not_at_once(archive, monkeypatch):
    monkeypatch.setattr(storage, "CHUNK_BYTES", 1000)
    response = get(archive, Range="bytes=5-2504")
    chunks = list(response.streaming_content)
    response.close()
    assert [len(chunk) for chunk in chunks] == [1000, 1000, 500]
    assert b"".join(chunks) == BODY[5:2505]


def test_the_file_is_closed_even_when_the_body_is_never_read(archive, monkeypatch):
    opened = []
    real_open = open

    def tracking_open(*args, **kwargs):
        handle = real_open(*args, **kwargs)
        opened.append(handle)
        return handle

    monkeypatch.setattr("builtins.open", tracking_open)
    get(archive).close()
    get(archive, Range="bytes=99999-").close()  # 416: nothing to open
    assert len(opened) == 1
    assert all(handle.closed for handle in opened)


def test_head_answers_the_headers_without_opening_the_file(archive, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("opened")

    monkeypatch.setattr(downloads, "open", refuse, raising=False)
    request = RequestFactory().head("/download", headers={"Range": "bytes=10-19"})
    response = ranged_file_response(
        request, archive, filename="demo-1.0.0.tar.gz", content_type="application/gzip"
    )
    assert response.status_code == 206
    assert not response.streaming
    assert response["Content-Length"] == "10"
    assert response["Content-Range"] == f"bytes 10-19/{len(BODY)}"
    assert response["Content-Disposition"] == 'attachment; filename="demo-1.0.0.tar.gz"'


def test_if_none_match_with_a_list_holding_the_etag_answers_304(archive):
    response = get(archive, If_None_Match=f'"other", "{SHA}"')
    assert response.status_code == 304
    assert response["ETag"] == f'"{SHA}"'


def test_hand_off_refuses_a_web_server_it_does_not_know(tmp_path):
    with pytest.raises(ValueError, match="lighttpd"):
        downloads.handed_off_response(
            RequestFactory().get("/media"),
            root=tmp_path,
            relative_path="ab/cd/x.png",
            mode="lighttpd",
            nginx_prefix="/internal-media/",
            content_type="image/png",
        )
