"""Imports with ARBITER_STORAGE=s3 against moto's S3 server: uploads wait in the bucket's
``uploads`` area and are gone once the job ends; large files go straight from the client to
the bucket by presigned multipart upload (resumable, the size checked at completion, for the
project's curators only); a curator imports from a bucket prefix, a missing object named."""

from __future__ import annotations

import io
import json
import tarfile

import httpx
import pytest

from annotation.core import storage
from annotation.imports.direct import MIN_PART_BYTES
from annotation.imports.services import import_job_run
from annotation.models import ImportJob, Pair, Role
from tests.annotation.imports.conftest import (
    image_bytes,
    image_pair,
    jsonl_bytes,
    leftover_uploads,
    text_pair,
    upload,
)
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def _archive(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _run_on_commit(django_capture_on_commit_callbacks, call):
    with django_capture_on_commit_callbacks(execute=True):
        response = call()
    return response


def test_an_upload_waits_in_the_bucket_and_is_removed_when_the_job_ends(
    s3_storage, project, carol, api_for, django_capture_on_commit_callbacks, settings, monkeypatch
):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10  # a job, as a large upload is
    files = {
        "file": upload("pairs.jsonl", jsonl_bytes([image_pair("p1", "a.png", "b.png")])),
        "media_archive": upload(
            "media.tar.gz", _archive({"a.png": image_bytes(), "b.png": image_bytes((0, 90, 0))})
        ),
    }
    seen = []
    local_copy = storage.local_copy

    def spy(area, name):
        seen.append((area, storage.exists(area, name)))
        return local_copy(area, name)

    monkeypatch.setattr(storage, "local_copy", spy)
    response = _run_on_commit(
        django_capture_on_commit_callbacks,
        lambda: api_for(carol).post(f"/api/v1/projects/{project.slug}/imports/", files),
    )
    assert response.status_code == 201, response.content
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert Pair.objects.filter(project=project).count() == 1
    # Both files were read from the bucket, and nothing of them is left there or on disk.
    assert seen == [("uploads", True), ("uploads", True)]
    assert s3_storage.keys("uploads") == []
    assert leftover_uploads() == []


def _start(api, slug, *, size, filename="pairs.jsonl", field="file"):
    return api.post(
        f"/api/v1/projects/{slug}/uploads/",
        {"field": field, "filename": filename, "size": size},
        format="json",
    )


def _put_parts(api, slug, token, data, part_bytes, numbers):
    urls = api.post(
        f"/api/v1/projects/{slug}/uploads/part-urls/",
        {"token": token, "numbers": numbers},
        format="json",
    ).json()["urls"]
    for number in numbers:
        chunk = data[(number - 1) * part_bytes : number * part_bytes]
        # The client's PUT goes to the bucket itself, not through Arbiter.
        assert urls[str(number)].startswith(storage.s3_client().meta.endpoint_url)
        httpx.put(urls[str(number)], content=chunk, timeout=30).raise_for_status()


def _big_pairs_file(size: int) -> bytes:
    filler = "x" * 50_000
    pairs, data = [], b""
    while len(data) < size:
        pairs.append(text_pair(f"p{len(pairs)}", prompt=filler))
        data = jsonl_bytes(pairs)
    return data


def test_a_large_file_goes_to_the_bucket_in_parts_resumes_and_is_imported(
    s3_storage, project, carol, api_for, django_capture_on_commit_callbacks, settings
):
    settings.ARBITER_UPLOAD_PART_BYTES = MIN_PART_BYTES
    data = _big_pairs_file(MIN_PART_BYTES + 200_000)
    api = api_for(carol)
    started = _start(api, project.slug, size=len(data))
    assert started.status_code == 201, started.content
    token, part_bytes = started.json()["token"], started.json()["part_bytes"]
    assert started.json()["part_count"] == 2
    _put_parts(api, project.slug, token, data, part_bytes, [1])
    # Completing early names what is missing; the page reloaded finds part 1 there.
    early = api.post(f"/api/v1/projects/{project.slug}/uploads/complete/", {"token": token})
    assert early.status_code == 409
    assert "2" in early.json()["detail"]
    listed = api.post(f"/api/v1/projects/{project.slug}/uploads/parts/", {"token": token})
    assert [(p["number"], p["size"]) for p in listed.json()["parts"]] == [(1, part_bytes)]
    _put_parts(api, project.slug, token, data, part_bytes, [2])
    done = api.post(f"/api/v1/projects/{project.slug}/uploads/complete/", {"token": token})
    assert done.status_code == 200
    assert done.json() == {"size": len(data)}
    [key] = s3_storage.keys("uploads")
    assert key.endswith("/pairs-pairs.jsonl")  # the server's key, in the uploads area
    response = _run_on_commit(
        django_capture_on_commit_callbacks,
        lambda: api.post(
            f"/api/v1/projects/{project.slug}/imports/stored/", {"file": token}, format="json"
        ),
    )
    assert response.status_code == 201, response.content
    job = ImportJob.objects.get(pk=response.json()["id"])
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert Pair.objects.filter(project=project).count() == data.count(b"\n")
    assert s3_storage.keys("uploads") == []


def test_the_size_limit_is_checked_against_the_object_at_completion(
    s3_storage, project, carol, api_for, settings
):
    api = api_for(carol)
    settings.ARBITER_MAX_UPLOAD_BYTES = 1000
    refused = _start(api, project.slug, size=1001)
    assert refused.status_code == 400
    assert "1,000 bytes" in refused.json()["detail"]
    # A page that announced less than it sent: the object itself is measured and removed.
    started = _start(api, project.slug, size=10).json()
    _put_parts(api, project.slug, started["token"], b"y" * 2000, 2000, [1])
    done = api.post(
        f"/api/v1/projects/{project.slug}/uploads/complete/", {"token": started["token"]}
    )
    assert done.status_code == 400
    assert "1,000 bytes" in done.json()["detail"]
    assert s3_storage.keys("uploads") == []


def test_only_the_projects_curators_use_an_upload_and_only_their_own(
    s3_storage, project, other_project, alice, carol, eve, api_for
):
    token = _start(api_for(carol), project.slug, size=100).json()["token"]
    assert _start(api_for(alice), project.slug, size=100).status_code == 403
    assert _start(api_for(eve), project.slug, size=100).status_code == 404
    for user in (alice, eve):
        answer = api_for(user).post(
            f"/api/v1/projects/{project.slug}/uploads/parts/", {"token": token}
        )
        assert answer.status_code in (403, 404)
    # Another curator of the project, or carol in another project, cannot use her token.
    other = UserFactory(username="frank")
    MembershipFactory(project=project, user=other, role=Role.CURATOR)
    MembershipFactory(project=other_project, user=carol, role=Role.CURATOR)
    for user, slug in ((other, project.slug), (carol, other_project.slug)):
        answer = api_for(user).post(f"/api/v1/projects/{slug}/uploads/parts/", {"token": token})
        assert answer.status_code == 404
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    answer = api_for(carol).post(
        f"/api/v1/projects/{project.slug}/uploads/parts/", {"token": tampered}
    )
    assert answer.status_code == 404
    aborted = api_for(carol).post(
        f"/api/v1/projects/{project.slug}/uploads/abort/", {"token": token}
    )
    assert aborted.status_code == 204


def test_the_session_api_needs_the_csrf_token(s3_storage, project, carol, client):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(carol)
    answer = browser.post(
        f"/api/v1/projects/{project.slug}/uploads/",
        {"field": "file", "filename": "p.jsonl", "size": 10},
        content_type="application/json",
    )
    assert answer.status_code == 403
    assert "CSRF" in answer.json()["detail"]


def test_direct_uploads_need_object_storage(project, carol, api_for):
    answer = _start(api_for(carol), project.slug, size=100)
    assert answer.status_code == 409
    assert "ARBITER_STORAGE=s3" in answer.json()["detail"]


def _put(s3_storage, key: str, data: bytes) -> None:
    s3_storage.client.put_object(Bucket=s3_storage.bucket, Key=key, Body=data)


def test_a_curator_imports_a_bucket_prefix_with_its_media(
    s3_storage, project, carol, api_for, django_capture_on_commit_callbacks, settings
):
    settings.ARBITER_S3_IMPORT_ROOT = f"{s3_storage.prefix}-imports"
    root = f"{s3_storage.prefix}-imports/mmrb2"
    _put(s3_storage, f"{root}/pairs.jsonl", jsonl_bytes([image_pair("p1", "in/a.png", "b.png")]))
    _put(s3_storage, f"{root}/in/a.png", image_bytes())
    _put(s3_storage, f"{root}/b.png", image_bytes((0, 0, 200)))
    response = _run_on_commit(
        django_capture_on_commit_callbacks,
        lambda: api_for(carol).post(
            f"/api/v1/projects/{project.slug}/imports/bucket/",
            {"prefix": "mmrb2/", "file": "pairs.jsonl"},
            format="json",
        ),
    )
    assert response.status_code == 201, response.content
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert job.created_media == 2
    assert s3_storage.keys("uploads") == []
    # The curator's own objects stay where they are.
    listed = s3_storage.client.list_objects_v2(Bucket=s3_storage.bucket, Prefix=root)
    assert len(listed["Contents"]) == 3


def test_a_bucket_import_names_the_missing_object(
    s3_storage, project, carol, api_for, django_capture_on_commit_callbacks, settings
):
    settings.ARBITER_S3_IMPORT_ROOT = f"{s3_storage.prefix}-imports"
    root = f"{s3_storage.prefix}-imports/set"
    api = api_for(carol)
    url = f"/api/v1/projects/{project.slug}/imports/bucket/"
    missing_file = api.post(url, {"prefix": "set", "file": "pairs.jsonl"}, format="json")
    assert missing_file.status_code == 400
    assert f"s3://{s3_storage.bucket}/{root}/pairs.jsonl" in json.dumps(missing_file.json())
    _put(s3_storage, f"{root}/pairs.jsonl", jsonl_bytes([image_pair("p1", "a.png", "gone.png")]))
    _put(s3_storage, f"{root}/a.png", image_bytes())
    response = _run_on_commit(
        django_capture_on_commit_callbacks,
        lambda: api.post(url, {"prefix": "set", "file": "pairs.jsonl"}, format="json"),
    )
    job = ImportJob.objects.get(pk=response.json()["id"])
    assert job.status == ImportJob.Status.FAILED
    [error] = job.errors
    assert error["line"] == 1
    assert f"s3://{s3_storage.bucket}/{root}/gone.png" in error["message"]
    assert not Pair.objects.exists()
    assert s3_storage.keys("uploads") == []


def test_a_bucket_prefix_stays_out_of_arbiters_own_objects(
    s3_storage, project, alice, carol, eve, api_for, settings
):
    settings.ARBITER_S3_IMPORT_ROOT = s3_storage.prefix
    api = api_for(carol)
    url = f"/api/v1/projects/{project.slug}/imports/bucket/"
    for prefix in ("releases/demo", "../x", "media"):
        answer = api.post(url, {"prefix": prefix, "file": "pairs.jsonl"}, format="json")
        assert answer.status_code == 400, (prefix, answer.content)
    outsider = api_for(eve).post(url, {"prefix": "x", "file": "p.jsonl"}, format="json")
    assert outsider.status_code == 404
    annotator = api_for(alice).post(url, {"prefix": "x", "file": "p.jsonl"}, format="json")
    assert annotator.status_code == 403


def test_the_import_page_offers_both_and_lets_the_page_reach_the_bucket(
    s3_storage, project, carol, client_for, django_capture_on_commit_callbacks, settings
):
    settings.ARBITER_S3_IMPORT_ROOT = f"{s3_storage.prefix}-imports"
    client = client_for(carol)
    page = client.get(f"/p/{project.slug}/imports/")
    assert b"data-direct-upload" in page.content
    assert b"Import from the bucket" in page.content
    assert s3_storage.server.url in page["Content-Security-Policy"]
    url = f"/p/{project.slug}/imports/"
    missing = client.post(url, {"bucket_prefix": "none", "file": "pairs.jsonl"})
    assert missing.status_code == 400
    assert f"{s3_storage.prefix}-imports/none/pairs.jsonl" in missing.content.decode()
    _put(s3_storage, f"{s3_storage.prefix}-imports/t/p.jsonl", jsonl_bytes([text_pair("t1")]))
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(url, {"bucket_prefix": "t", "file": "p.jsonl"})
    job = ImportJob.objects.get()
    assert answer.status_code == 302
    assert answer["Location"].endswith(f"?job={job.pk}")
    job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors


def test_without_object_storage_the_page_keeps_todays_upload(project, carol, client_for):
    page = client_for(carol).get(f"/p/{project.slug}/imports/")
    assert b"data-direct-upload" not in page.content
    assert b"Import from the bucket" not in page.content


def test_an_upload_starts_one_import_and_a_vanished_one_fails_its_job(
    s3_storage, project, carol, api_for, settings
):
    api = api_for(carol)
    data = jsonl_bytes([text_pair("once")])
    token = _start(api, project.slug, size=len(data)).json()["token"]
    _put_parts(api, project.slug, token, data, len(data), [1])
    api.post(f"/api/v1/projects/{project.slug}/uploads/complete/", {"token": token})
    url = f"/api/v1/projects/{project.slug}/imports/stored/"
    first = api.post(url, {"file": token}, format="json")  # queued until the test commits
    assert first.status_code == 201
    again = api.post(url, {"file": token}, format="json")
    assert again.status_code == 409
    assert "imported already" in again.json()["detail"]
    job = ImportJob.objects.get()
    storage.delete("uploads", job.upload_path)
    import_job_run(job=job)
    assert job.status == ImportJob.Status.FAILED
    assert "upload the file again" in job.errors[0]["message"]
    assert not Pair.objects.exists()


def test_a_pairs_file_and_its_media_archive_sent_straight_to_the_bucket_import_together(
    s3_storage, project, carol, api_for, django_capture_on_commit_callbacks
):
    api = api_for(carol)
    pairs = jsonl_bytes([image_pair("m1", "a.png", "b.png")])
    archive = _archive({"a.png": image_bytes(), "b.png": image_bytes((10, 10, 240))})
    tokens = {}
    for field, name, data in (
        ("file", "pairs.jsonl", pairs),
        ("media_archive", "media.tar.gz", archive),
    ):
        token = _start(api, project.slug, size=len(data), filename=name, field=field).json()
        _put_parts(api, project.slug, token["token"], data, len(data), [1])
        done = api.post(
            f"/api/v1/projects/{project.slug}/uploads/complete/", {"token": token["token"]}
        )
        assert done.json() == {"size": len(data)}
        tokens[field] = token["token"]
    url = f"/api/v1/projects/{project.slug}/imports/stored/"
    swapped = api.post(url, {"file": tokens["media_archive"]}, format="json")
    assert swapped.status_code == 400
    response = _run_on_commit(
        django_capture_on_commit_callbacks, lambda: api.post(url, tokens, format="json")
    )
    assert response.status_code == 201, response.content
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert job.created_media == 2
    assert s3_storage.keys("uploads") == []
    assert leftover_uploads() == []
