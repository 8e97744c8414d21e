"""The media view streams any media by byte ranges (a browser seeking in a long video), or
hands the bytes to the web server (``ARBITER_MEDIA_ACCEL``), with the release downloads' one
implementation (annotation/core/downloads.py; docs/operations.md, "Media through the web server").
Permissions and blinding as in test_media_serving.py."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token

from annotation.core import downloads
from annotation.core.media_keys import media_etag, media_path
from annotation.imports.importer import pairs_import
from annotation.models import Media, ProjectMedia
from tests.annotation.imports.conftest import image_bytes, image_pair, write_jsonl
from tests.celery_worker import database_url_for_tests
from tests.factories import UserFactory
from tests.live_gunicorn import LiveGunicorn

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
BODY = bytes(range(256)) * 40  # 10,240 bytes, each offset recognisable
MIB = 1024 * 1024


def store_media(project, chunks) -> Media:
    """A media row whose served copy is the bytes of ``chunks``, written chunk by chunk (the
    view serves by content type and size, whatever the bytes are)."""
    digest = hashlib.sha256()
    scratch = Path(settings.MEDIA_ROOT) / "incoming"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    with open(scratch, "wb") as out:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    sha = digest.hexdigest()
    media = Media.objects.create(
        sha256=sha,
        format="PNG",
        width=1,
        height=1,
        size_bytes=size,
        served_sha256=sha,
        # Recorded as rebuilt, so the view serves these bytes as they are rather than rebuild.
        strip_result=Media.StripResult.REBUILT,
    )
    target = Path(settings.MEDIA_ROOT) / media.served_relative_path
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch.rename(target)
    ProjectMedia.objects.create(project=project, media=media)
    return media


def peak_rss() -> int:
    """The process's peak resident memory since ``reset_peak_rss`` (Linux's VmHWM), so a
    whole-file read freed before the next look still counts; psutil's RSS elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return psutil.Process().memory_info().rss


def reset_peak_rss() -> int:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass
    return psutil.Process().memory_info().rss


@pytest.fixture
def stored(project):
    return store_media(project, [BODY])


def url(project, media) -> str:
    return media_path(slug=project.slug, sha256=media.sha256)


def etag(media) -> str:
    """The ETag the view sends for ``media``'s served copy."""
    return f'"{media_etag(media.served_sha256)}"'


def body(response) -> bytes:
    """The streamed body; reading it to the end closes the response (and its file)."""
    return b"".join(response.streaming_content)


@pytest.fixture
def member(client_for, alice):
    return client_for(alice)


@pytest.fixture
def no_open(monkeypatch):
    """Fails any file the download code would open, so a test shows nothing was read."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"opened {args[0]}")

    monkeypatch.setattr(downloads, "open", refuse, raising=False)


def test_whole_file_says_it_takes_ranges(member, project, stored):
    response = member.get(url(project, stored))
    assert response.status_code == 200
    assert response["Accept-Ranges"] == "bytes"
    assert response["Content-Length"] == str(len(BODY))
    assert response["ETag"] == etag(stored)
    assert response["Content-Disposition"] == "inline"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "no-transform" in response["Cache-Control"]
    assert body(response) == BODY


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [("bytes=10-19", 10, 19), ("bytes=10000-", 10000, 10239), ("bytes=-3", 10237, 10239)],
)
def test_a_range_answers_206_with_that_slice(member, project, stored, header, start, end):
    response = member.get(url(project, stored), HTTP_RANGE=header)
    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes {start}-{end}/{len(BODY)}"
    assert response["Content-Length"] == str(end - start + 1)
    assert response["Content-Type"] == "image/png"
    assert response["ETag"] == etag(stored)
    assert body(response) == BODY[start : end + 1]


def test_a_range_past_the_end_answers_416_with_the_size(member, project, stored):
    response = member.get(url(project, stored), HTTP_RANGE="bytes=10240-")
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{len(BODY)}"


def test_if_range_with_the_served_hash_serves_the_range(member, project, stored):
    response = member.get(url(project, stored), HTTP_RANGE="bytes=5-9", HTTP_IF_RANGE=etag(stored))
    assert response.status_code == 206
    assert body(response) == BODY[5:10]


@pytest.mark.parametrize(
    "validator",
    # No Last-Modified is sent, so no date holds; a weak tag never matches for a range.
    ['"another-hash"', "Tue, 01 Dec 2026 12:00:00 GMT", "weak"],
)
def test_if_range_that_does_not_hold_sends_the_whole_file(member, project, stored, validator):
    if validator == "weak":
        validator = f"W/{etag(stored)}"
    response = member.get(url(project, stored), HTTP_RANGE="bytes=5-9", HTTP_IF_RANGE=validator)
    assert response.status_code == 200
    assert "Content-Range" not in response
    assert body(response) == BODY


@pytest.mark.parametrize("header", ["bytes=0-1,5-6", "bytes=a-b", "items=0-1", "bytes=9-2"])
def test_several_ranges_or_a_bad_header_send_the_whole_file(member, project, stored, header):
    response = member.get(url(project, stored), HTTP_RANGE=header)
    assert response.status_code == 200
    assert body(response) == BODY


def test_head_sends_the_headers_without_opening_the_file(member, project, stored, no_open):
    whole = member.head(url(project, stored))
    assert whole.status_code == 200
    assert whole["Content-Length"] == str(len(BODY))
    assert whole["Accept-Ranges"] == "bytes"
    assert whole["ETag"] == etag(stored)
    assert whole.content == b""
    part = member.head(url(project, stored), HTTP_RANGE="bytes=100-199")
    assert part.status_code == 206
    assert part["Content-Range"] == f"bytes 100-199/{len(BODY)}"
    assert part["Content-Length"] == "100"
    assert member.head(url(project, stored), HTTP_RANGE="bytes=99999-").status_code == 416


def test_if_none_match_still_answers_304_also_with_a_range(member, project, stored):
    tag = etag(stored)
    for headers in ({}, {"HTTP_RANGE": "bytes=0-9"}):
        response = member.get(url(project, stored), HTTP_IF_NONE_MATCH=tag, **headers)
        assert response.status_code == 304
        assert response["ETag"] == tag


@pytest.mark.parametrize("method", ["get", "head"])
def test_outsider_gets_404_for_a_range_too(client_for, eve, project, stored, method):
    response = getattr(client_for(eve), method)(url(project, stored), HTTP_RANGE="bytes=0-9")
    assert response.status_code == 404
    assert "Content-Range" not in response


def test_other_methods_are_refused(member, project, stored):
    assert member.post(url(project, stored)).status_code == 405


def test_a_large_file_is_served_to_its_end_by_ranges_with_rss_flat(member, project):
    """20 MB in 1 MiB ranges, as a browser playing a video fetches it: every slice right,
    and the process's memory grows by far less than the file."""
    seed = random.Random(17)
    total = 20 * MIB
    large = store_media(project, (seed.randbytes(MIB) for _ in range(total // MIB)))
    address = url(project, large)
    body(member.get(address, HTTP_RANGE="bytes=0-0"))  # warm up: imports, the session
    served = hashlib.sha256()
    before = reset_peak_rss()
    for start in range(0, total, MIB):
        response = member.get(address, HTTP_RANGE=f"bytes={start}-{start + MIB - 1}")
        assert response.status_code == 206
        assert response["Content-Range"] == f"bytes {start}-{start + MIB - 1}/{total}"
        for chunk in response.streaming_content:
            served.update(chunk)
    peak = max(peak_rss(), psutil.Process().memory_info().rss)
    assert served.hexdigest() == large.served_sha256
    assert peak - before < total // 4, f"RSS grew by {(peak - before) / MIB:.1f} MiB"


@pytest.mark.parametrize(
    ("mode", "header"), [("nginx", "X-Accel-Redirect"), ("apache", "X-Sendfile")]
)
def test_hand_off_names_the_file_for_the_web_server_and_reads_nothing(
    settings, member, project, stored, no_open, mode, header
):
    settings.ARBITER_MEDIA_ACCEL = mode
    settings.ARBITER_MEDIA_ACCEL_PREFIX = "/protected-media/"
    expected = {
        "nginx": "/protected-media/" + stored.served_relative_path,
        "apache": str(Path(settings.MEDIA_ROOT) / stored.served_relative_path),
    }[mode]
    for method in ("get", "head"):
        # The web server answers the range itself: Django sends no Content-Range.
        response = getattr(member, method)(url(project, stored), HTTP_RANGE="bytes=0-9")
        assert response.status_code == 200
        assert response[header] == expected
        assert "Content-Range" not in response
        assert response.content == b""
        assert response["Content-Type"] == "image/png"
        assert response["Content-Disposition"] == "inline"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["ETag"] == etag(stored)
    other = {"nginx": "X-Sendfile", "apache": "X-Accel-Redirect"}[mode]
    assert other not in response
    tag = etag(stored)
    cached = member.get(url(project, stored), HTTP_IF_NONE_MATCH=tag)
    assert cached.status_code == 304
    assert header not in cached


@pytest.mark.parametrize("mode", ["nginx", "apache"])
def test_hand_off_happens_only_after_the_permission_check(
    settings, client_for, eve, project, stored, mode
):
    settings.ARBITER_MEDIA_ACCEL = mode
    response = client_for(eve).get(url(project, stored))
    assert response.status_code == 404
    assert "X-Accel-Redirect" not in response
    assert "X-Sendfile" not in response


@pytest.mark.parametrize("mode", ["off", "nginx", "apache"])
def test_no_header_names_a_model_or_the_imported_file(settings, member, project, tmp_path, mode):
    """Blinding: the answer carries the served copy's hash, never a model's name or the name
    the file was imported under."""
    settings.ARBITER_MEDIA_ACCEL = mode
    (tmp_path / "gpt-image-m-one.png").write_bytes(image_bytes((1, 2, 3), size=(20, 20)))
    (tmp_path / "flux-m-two.png").write_bytes(image_bytes((3, 2, 1), size=(20, 20)))
    pair = image_pair("p1", "gpt-image-m-one.png", "flux-m-two.png")
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "p.jsonl", [pair]), media_root=tmp_path
    )
    for media in Media.objects.all():
        response = member.get(url(project, media), HTTP_RANGE="bytes=0-9")
        assert response.status_code in (200, 206)
        headers = " ".join(f"{k}: {v}" for k, v in response.items()).lower()
        for leak in ("m-one", "m-two", "gpt", "flux", "response_a", "response_b"):
            assert leak not in headers
        if response.streaming:
            body(response)


def _manage_check(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARBITER_MEDIA_ACCEL": "lighttpd"}, "ARBITER_MEDIA_ACCEL='lighttpd': use one of off"),
        ({"ARBITER_MEDIA_ACCEL_PREFIX": "internal"}, "ARBITER_MEDIA_ACCEL_PREFIX='internal'"),
    ],
)
def test_a_bad_hand_off_setting_stops_start_up_naming_it(env, message):
    result = _manage_check(**env)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("name", ["%00", "a%00b", "ABC", "0" * 63, "g" * 64])
def test_a_name_that_is_no_hash_is_404_before_any_lookup(member, project, stored, name):
    response = member.get(f"/p/{project.slug}/media/{name}", HTTP_RANGE="bytes=0-9")
    # A NUL may be refused (400) by a middleware before the view; never a 500.
    assert response.status_code == 404 or ("%00" in name and response.status_code == 400)


def _worker_rss(server: LiveGunicorn) -> psutil.Process:
    """gunicorn's one worker (the child of the process the test started)."""
    (worker,) = psutil.Process(server.process.pid).children()
    return worker


def _reset_peak(process: psutil.Process) -> int:
    with contextlib.suppress(OSError):
        Path(f"/proc/{process.pid}/clear_refs").write_text("5")
    return process.memory_info().rss


def _peak(process: psutil.Process) -> int:
    try:
        for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return process.memory_info().rss


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_a_large_file_by_ranges_with_the_worker_rss_flat(project, alice):
    """Over real HTTP, as a browser seeking in a video: HEAD, 206 slices to the end, 416; the
    web worker's peak memory grows by far less than the 20 MB file."""
    total = 20 * MIB
    seed = random.Random(9)
    large = store_media(project, (seed.randbytes(MIB) for _ in range(total // MIB)))
    token = Token.objects.create(user=alice)
    env = {"ARBITER_MEDIA_ROOT": str(settings.MEDIA_ROOT)}
    with (
        LiveGunicorn(database_url=database_url_for_tests(), extra_env=env) as server,
        httpx.Client(
            base_url=server.url, headers={"Authorization": f"Token {token.key}"}, timeout=30
        ) as http,
    ):
        address = url(project, large)
        head = http.head(address)
        assert head.status_code == 200, server.log()
        assert head.headers["Content-Length"] == str(total)
        assert head.content == b""
        assert len(http.get(address, headers={"Range": "bytes=0-0"}).content) == 1  # warm up
        worker = _worker_rss(server)
        before = _reset_peak(worker)
        served = hashlib.sha256()
        for start in range(0, total, MIB):
            response = http.get(address, headers={"Range": f"bytes={start}-{start + MIB - 1}"})
            assert response.status_code == 206
            assert response.headers["Content-Range"] == f"bytes {start}-{start + MIB - 1}/{total}"
            served.update(response.content)
        growth = max(_peak(worker), worker.memory_info().rss) - before
        assert served.hexdigest() == large.served_sha256
        assert growth < total // 4, f"worker RSS grew by {growth / MIB:.1f} MiB"
        past = http.get(address, headers={"Range": f"bytes={total}-"})
        assert past.status_code == 416
        assert past.headers["Content-Range"] == f"bytes */{total}"
        outsider = Token.objects.create(user=UserFactory(username="outsider"))
        refused = http.get(address, headers={"Authorization": f"Token {outsider.key}"})
        assert refused.status_code == 404, server.log()[-3000:]
