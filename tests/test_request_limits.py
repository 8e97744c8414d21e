"""Request body limits (docs/operations.md, "Request body limits"): a body is refused from its
declared length before CSRF or form parsing reads it; only a project's curators may send large
bodies, and only to its import endpoints; a body without a length is refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Pair
from tests.annotation.imports.conftest import image_bytes, image_pair, text_pair
from tests.annotation.imports.test_imports import jsonl_bytes, upload, zip_bytes
from tests.factories import UserFactory
from tests.live_gunicorn import ROOT, LiveGunicorn

SMALL_LIMIT = 32 * 1024
ATTACK_BYTES = 150 * 1024 * 1024
SENT_BYTES = 64 * 1024  # what the attacker sends of the body before waiting for an answer
ANSWER_TIMEOUT_S = 15
CSRF_COOKIE = "a" * 32  # any well-formed token: an anonymous client may pick its own


@pytest.fixture
def small_limit(settings):
    """A request limit small enough that a real upload of a few pairs exceeds it."""
    settings.ARBITER_MAX_REQUEST_BYTES = SMALL_LIMIT
    return SMALL_LIMIT


def large_upload() -> dict:
    """A real pairs file with a media archive, padded with valid pairs past SMALL_LIMIT."""
    pairs = [image_pair("img", "a.png", "b.png")]
    pairs += [text_pair(f"pad-{i}", prompt="x" * 200) for i in range(120)]
    data = jsonl_bytes(pairs)
    assert len(data) > SMALL_LIMIT
    archive = zip_bytes({"a.png": image_bytes((9, 9, 9)), "b.png": image_bytes((1, 1, 1))})
    return {"file": upload("p.jsonl", data), "media_archive": upload("m.zip", archive)}


API_IMPORTS = "/api/v1/projects/{}/imports/"


# The import endpoints -------------------------------------------------------------------


def test_curator_uploads_past_the_request_limit_on_the_import_page(
    client_for, carol, project, small_limit, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # the import job's task
        response = client_for(carol).post(reverse("imports", args=[project.slug]), large_upload())
    assert response.status_code == 302
    assert Pair.objects.filter(project=project).count() == 121


def test_curator_uploads_past_the_request_limit_over_the_api_with_a_token(
    api_for, carol, project, small_limit
):
    response = api_for(carol).post(
        API_IMPORTS.format(project.slug), large_upload(), format="multipart"
    )
    assert response.status_code == 201, response.content
    assert response.json()["created_pairs"] == 121


def test_superuser_may_upload_past_the_request_limit(api_for, project, small_limit):
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    response = api_for(admin).post(
        API_IMPORTS.format(project.slug), large_upload(), format="multipart"
    )
    assert response.status_code == 201, response.content


def test_others_get_413_on_the_import_page_before_any_parsing(
    client, alice, dave, eve, project, small_limit, settings, tmp_path
):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path)
    url = reverse("imports", args=[project.slug])
    for user in (alice, dave, eve, None):
        client.logout()
        if user is not None:
            client.force_login(user)
        response = client.post(url, large_upload())
        assert response.status_code == 413, user
        assert response["Content-Type"].startswith("text/plain")
        assert f"larger than the {SMALL_LIMIT:,} bytes" in response.content.decode()
    assert list(tmp_path.iterdir()) == []
    assert not Pair.objects.exists()


def test_others_get_413_as_json_on_the_import_api(api_for, alice, dave, eve, project, small_limit):
    """Size is checked before membership: an outsider learns nothing from 413 that the
    endpoint's URL did not already say, and no body is read to find out more."""
    clients = [api_for(alice), api_for(dave), api_for(eve), APIClient()]
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    for api in [*clients, bad_token]:
        response = api.post(API_IMPORTS.format(project.slug), large_upload(), format="multipart")
        assert response.status_code == 413
        assert "Content-Length" in response.json()["detail"]
    assert not Pair.objects.exists()


def test_a_curator_of_another_project_gets_413(api_for, carol, other_project, small_limit):
    response = api_for(carol).post(
        API_IMPORTS.format(other_project.slug), large_upload(), format="multipart"
    )
    assert response.status_code == 413


def test_curators_get_413_past_the_upload_limit(api_for, carol, project, settings):
    settings.ARBITER_MAX_REQUEST_BYTES = settings.ARBITER_MAX_UPLOAD_BYTES = SMALL_LIMIT
    response = api_for(carol).post(
        API_IMPORTS.format(project.slug), large_upload(), format="multipart"
    )
    assert response.status_code == 413
    assert f"larger than the {SMALL_LIMIT:,} bytes" in response.json()["detail"]


def test_curators_are_held_to_the_request_limit_elsewhere(api_for, carol, project, small_limit):
    response = api_for(carol).post(
        reverse("api-projects"), {"name": "x" * SMALL_LIMIT}, format="json"
    )
    assert response.status_code == 413


def test_content_length_that_is_not_a_number_is_refused(client, db):
    response = client.generic("POST", "/login/", b"username=a", CONTENT_LENGTH="ten")
    assert response.status_code == 400
    assert "Content-Length 'ten' is not a number" in response.content.decode()


# Settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"ARBITER_MAX_REQUEST_BYTES": "2000", "ARBITER_MAX_UPLOAD_BYTES": "1000"},
            "ARBITER_MAX_REQUEST_BYTES=2000 is larger than ARBITER_MAX_UPLOAD_BYTES=1000",
        ),
        (
            {"ARBITER_MAX_REQUEST_BYTES": "1000", "ARBITER_MAX_FORM_BYTES": "2000"},
            "ARBITER_MAX_FORM_BYTES=2000 is larger than ARBITER_MAX_REQUEST_BYTES=1000",
        ),
    ],
)
def test_limits_that_contradict_each_other_stop_start_up(variables, message):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert message in result.stderr


# Against gunicorn, over a raw socket ---------------------------------------------------


def _exchange(port: int, request: bytes) -> bytes:
    """Sends the request (headers and the start of a body), then reads the answer without
    sending the rest: a server that waits for the whole body never answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(request)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
    return answer


@pytest.fixture
def gunicorn_with_spool(tmp_path):
    """gunicorn whose upload spool (TMPDIR, where FILE_UPLOAD_TEMP_DIR defaults to) is a
    folder of this test; these requests never reach the database."""
    spool = tmp_path / "spool"
    spool.mkdir()
    env = {"TMPDIR": str(spool), "ARBITER_VAR_DIR": str(tmp_path / "var")}
    with LiveGunicorn(database_url=os.environ["DATABASE_URL"], extra_env=env) as s:
        yield s, spool


def test_anonymous_150_mb_upload_to_login_is_refused_before_it_is_read(gunicorn_with_spool):
    """With a CSRF cookie of its own making, the attacker gets CsrfViewMiddleware to parse the
    form for the token; that used to spool the file part to disk while it arrived."""
    server, spool = gunicorn_with_spool
    boundary = "----arbiter-test-boundary"
    body_start = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="username"\r\n\r\nalice\r\n'
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="huge.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + b"\0" * SENT_BYTES
    headers = (
        "POST /login/ HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\n"
        f"Cookie: csrftoken={CSRF_COOKIE}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {ATTACK_BYTES}\r\n\r\n"
    ).encode()
    answer = _exchange(server.port, headers + body_start)
    assert list(spool.iterdir()) == [], "the file part was spooled to disk"
    assert answer.startswith(b"HTTP/1.1 413"), (answer[:200], server.log())
    assert f"Content-Length {ATTACK_BYTES:,} is larger than".encode() in answer


def test_chunked_body_without_a_length_is_refused_with_411(gunicorn_with_spool):
    server, spool = gunicorn_with_spool
    chunk = b"username=" + b"a" * SENT_BYTES
    request = (
        b"POST /login/ HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\n"
        b"Cookie: csrftoken=" + CSRF_COOKIE.encode() + b"\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    )  # no last chunk: the body never ends
    answer = _exchange(server.port, request)
    assert answer.startswith(b"HTTP/1.1 411"), (answer[:200], server.log())
    assert b"Content-Length is required" in answer
    assert list(spool.iterdir()) == []
