"""Releases over REST (docs/api.md, "Releases"): create and build, detail with manifest and
progress, publish, downloads (archive, files, CSV), diff; no edit of a release; who may call
what; CSRF for session clients; the endpoints in the OpenAPI schema."""

from __future__ import annotations

import csv
import hashlib
import io

import pytest
from rest_framework.test import APIClient

from annotation.models import Pair, Release
from annotation.releases.services import release_create
from tests.annotation.releases.conftest import TIE_ID, built_release
from tests.factories import MembershipFactory, PairFactory, UserFactory

pytestmark = pytest.mark.django_db

BASE = "/api/v1/projects/demo/releases/"


def body_of(response) -> bytes:
    return b"".join(response.streaming_content)


def test_create_builds_and_the_detail_shows_progress_and_manifest(
    api_for, filled, dave, django_capture_on_commit_callbacks
):
    api = api_for(dave)
    selection = {
        "include_ties": True,
        "tasks": ["code", "text"],
        "splits": [{"name": "train", "ratio": 0.5}, {"name": "test", "ratio": 0.5}],
        "seed": 3,
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(BASE, {"version": "1.0.0", "selection": selection}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["status"] == "queued"
    assert response.json()["url"] == f"{BASE}1.0.0/"
    detail = api.get(f"{BASE}1.0.0/").json()
    assert detail["status"] == "built"
    assert detail["percent"] == 100
    assert detail["selection"]["include_ties"] is True
    assert detail["selection"]["seed"] == 3
    assert detail["created_by"] == "dave"
    manifest = detail["manifest"]
    assert manifest["project"] == "demo"
    assert set(manifest["splits"]) <= {"train", "test"}
    assert any(name.endswith(".parquet") for name in manifest["files"])
    assert detail["card"].startswith("---\n")
    listed = api.get(BASE).json()
    assert [row["version"] for row in listed] == ["1.0.0"]
    assert "manifest" not in listed[0]


def test_a_draft_has_no_manifest_yet(api_for, filled, dave):
    release_create(project=filled, version="1.0.0", selection={}, user=dave)
    detail = api_for(dave).get(f"{BASE}1.0.0/").json()
    assert detail["status"] == "draft"
    assert detail["manifest"] is None


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"version": "1.0"}, "version: must be X.Y.Z"),
        ({"version": "1.0.0", "selection": {"splits": [{"name": "a", "ratio": 0.3}]}}, "add up"),
        ({"version": "1.0.0", "selection": {"min_agreement": 2}}, "min_agreement"),
        ({"version": "1.0.0", "selection": {"include_tie": True}}, "include_tie"),
        ({"version": "1.0.0", "selection": {"seed": "x"}}, "seed"),
        ({"selection": {}}, "version"),
    ],
)
def test_bad_input_is_400_naming_the_field(api_for, filled, dave, body, words):
    response = api_for(dave).post(BASE, body, format="json")
    assert response.status_code == 400
    assert words in str(response.json())
    assert not Release.objects.exists()


def test_a_version_the_project_has_is_409(api_for, filled, dave):
    built_release(filled, dave)
    response = api_for(dave).post(BASE, {"version": "1.0.0"}, format="json")
    assert response.status_code == 409
    assert "has a release 1.0.0 already" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_when_the_task_queue_is_down_create_is_503_and_leaves_a_draft(
    api_for, filled, dave, task_queue_down
):
    response = api_for(dave).post(BASE, {"version": "1.0.0"}, format="json")
    assert response.status_code == 503
    assert "saved as a draft" in response.json()["detail"]
    assert response["Retry-After"]
    assert Release.objects.get().status == Release.Status.DRAFT


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_a_release_is_never_edited_through_the_api(api_for, published, dave, method):
    response = getattr(api_for(dave), method)(
        f"{BASE}1.0.0/", {"version": "2.0.0", "selection": {}}, format="json"
    )
    assert response.status_code == 405
    assert "never edited" in response.json()["detail"]
    assert "POST /api/v1/projects/demo/releases/" in response.json()["detail"]
    published.refresh_from_db()
    assert published.version == "1.0.0"
    assert published.status == Release.Status.PUBLISHED


def test_publish_freezes_it_and_publishing_again_is_409(api_for, filled, dave):
    built_release(filled, dave)
    api = api_for(dave)
    response = api.post(f"{BASE}1.0.0/publish/")
    assert response.status_code == 200
    assert response.json()["status"] == "published"
    assert response.json()["published_by"] == "dave"
    again = api.post(f"{BASE}1.0.0/publish/")
    assert again.status_code == 409
    assert "only a built release is published" in again.json()["detail"]
    rebuild = api.post(f"{BASE}1.0.0/build/")
    assert rebuild.status_code == 409


def test_a_draft_cannot_be_published(api_for, filled, dave):
    release_create(project=filled, version="1.0.0", selection={}, user=dave)
    response = api_for(dave).post(f"{BASE}1.0.0/publish/")
    assert response.status_code == 409


def test_a_failed_build_is_built_again(api_for, filled, dave, django_capture_on_commit_callbacks):
    release = built_release(filled, dave)
    Release.objects.filter(pk=release.pk).update(status=Release.Status.FAILED, error="boom")
    with django_capture_on_commit_callbacks(execute=True):
        response = api_for(dave).post(f"{BASE}1.0.0/build/")
    assert response.status_code == 202
    assert Release.objects.get(pk=release.pk).status == Release.Status.BUILT


def test_downloads_wait_for_publishing(api_for, filled, dave):
    built_release(filled, dave)
    api = api_for(dave)
    for path in ("download/", "csv/", "files/manifest.json"):
        response = api.get(f"{BASE}1.0.0/{path}")
        assert response.status_code == 409, path
        assert "downloads open once it is published" in response.json()["detail"]
    assert api.get(f"{BASE}1.0.0/files/").status_code == 200  # the list is there to review


def test_the_archive_downloads_streamed_with_ranges(api_for, published, dave):
    api = api_for(dave)
    response = api.get(f"{BASE}1.0.0/download/", HTTP_ACCEPT="application/gzip")
    assert response.status_code == 200
    assert response.streaming
    data = body_of(response)
    assert hashlib.sha256(data).hexdigest() == published.archive_sha256
    assert response["Accept-Ranges"] == "bytes"
    tail = api.get(f"{BASE}1.0.0/download/", HTTP_RANGE="bytes=-100")
    assert tail.status_code == 206
    assert body_of(tail) == data[-100:]
    stale = api.get(f"{BASE}1.0.0/download/", HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"old"')
    assert stale.status_code == 200
    assert body_of(stale) == data
    cached = api.get(f"{BASE}1.0.0/download/", HTTP_IF_NONE_MATCH=f'"{published.archive_sha256}"')
    assert cached.status_code == 304


def test_files_are_listed_and_downloaded_by_name_only(api_for, published, dave):
    api = api_for(dave)
    files = api.get(f"{BASE}1.0.0/files/").json()
    names = [entry["name"] for entry in files]
    assert names[0] == "manifest.json"
    assert "README.md" in names
    for entry in files:
        response = api.get(entry["url"])
        assert response.status_code == 200, entry["name"]
        assert hashlib.sha256(body_of(response)).hexdigest() == entry["sha256"]
    for crafted in ("../../demo-1.0.0.tar.gz", "data/../../../../etc/passwd", "nope.txt"):
        response = api.get(f"{BASE}1.0.0/files/{crafted}")
        assert response.status_code == 404, crafted
        assert "has no file" in response.json()["detail"]


def test_the_csv_is_streamed_with_a_row_per_pair(api_for, published, dave):
    response = api_for(dave).get(f"{BASE}1.0.0/csv/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(body_of(response).decode())))
    assert len(rows) == published.pair_count
    assert {"id", "label", "source", "agreement", "prompt", "chosen"} <= set(rows[0])


def test_the_diff_lists_pairs_added_removed_and_relabelled(api_for, filled, dave):
    built_release(filled, dave, version="1.0.0")
    Pair.objects.filter(project=filled, external_id="rel-02").update(consensus_label="B")
    built_release(filled, dave, version="1.1.0", include_ties=True)
    api = api_for(dave)
    body = api.get(f"{BASE}1.1.0/diff/", {"against": "1.0.0"}).json()
    assert body["counts"]["added"] == 1
    assert body["counts"]["removed"] == 0
    assert body["added"][0]["id"] == TIE_ID
    assert body["relabelled"] == [{"id": "rel-02", "before": "A", "after": "B", "task": "code"}]
    missing = api.get(f"{BASE}1.1.0/diff/")
    assert missing.status_code == 400
    assert "against" in missing.json()
    assert api.get(f"{BASE}1.1.0/diff/", {"against": "bad"}).status_code == 400
    unknown = api.get(f"{BASE}1.1.0/diff/", {"against": "9.9.9"})
    assert unknown.status_code == 404
    assert "no release 9.9.9" in unknown.json()["detail"]


def every_endpoint() -> list[tuple[str, str]]:
    return [
        ("get", BASE),
        ("post", BASE),
        ("get", f"{BASE}1.0.0/"),
        ("post", f"{BASE}1.0.0/build/"),
        ("post", f"{BASE}1.0.0/publish/"),
        ("get", f"{BASE}1.0.0/download/"),
        ("get", f"{BASE}1.0.0/files/"),
        ("get", f"{BASE}1.0.0/files/manifest.json"),
        ("get", f"{BASE}1.0.0/csv/"),
        ("get", f"{BASE}1.0.0/diff/?against=1.0.0"),
    ]


@pytest.mark.parametrize(("persona", "status"), [("alice", 403), ("eve", 404)])
def test_annotators_get_403_and_outsiders_404_everywhere(
    request, api_for, published, persona, status
):
    api = api_for(request.getfixturevalue(persona))
    for method, path in every_endpoint():
        response = getattr(api, method)(path, {"version": "2.0.0"}, format="json")
        assert response.status_code == status, (method, path)
    assert Release.objects.count() == 1


def test_without_a_token_every_endpoint_is_401(published):
    api = APIClient()
    for method, path in every_endpoint():
        assert getattr(api, method)(path).status_code == 401, (method, path)


def test_another_projects_researcher_cannot_reach_them(api_for, published, other_project):
    stranger = UserFactory(username="oscar")
    MembershipFactory(project=other_project, user=stranger, role="researcher")
    PairFactory(project=other_project, status="consensus", consensus_label="A")
    own = release_create(project=other_project, version="1.0.0", selection={}, user=stranger)
    api = api_for(stranger)
    for method, path in every_endpoint():
        response = getattr(api, method)(path, {"version": "2.0.0"}, format="json")
        assert response.status_code == 404, (method, path)
    # Their own 1.0.0 is another release: nothing of demo's is reachable through it.
    assert api.get("/api/v1/projects/other/releases/1.0.0/").json()["status"] == own.status
    crafted = "/api/v1/projects/other/releases/1.0.0/files/../../demo/1.0.0/manifest.json"
    assert api.get(crafted).status_code in (404, 409)


def test_session_clients_need_the_csrf_token(published, dave, filled):
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(dave)
    response = api.post(BASE, {"version": "2.0.0"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert Release.objects.count() == 1


def test_the_endpoints_are_in_the_openapi_schema(client):
    paths = client.get("/api/v1/schema/", {"format": "json"}).json()["paths"]
    for path in (
        "/api/v1/projects/{slug}/releases/",
        "/api/v1/projects/{slug}/releases/{version}/",
        "/api/v1/projects/{slug}/releases/{version}/publish/",
        "/api/v1/projects/{slug}/releases/{version}/build/",
        "/api/v1/projects/{slug}/releases/{version}/download/",
        "/api/v1/projects/{slug}/releases/{version}/files/",
        "/api/v1/projects/{slug}/releases/{version}/files/{name}",
        "/api/v1/projects/{slug}/releases/{version}/csv/",
        "/api/v1/projects/{slug}/releases/{version}/diff/",
    ):
        assert path in paths, path
    assert set(paths["/api/v1/projects/{slug}/releases/{version}/"]) == {"get"}
    download = paths["/api/v1/projects/{slug}/releases/{version}/download/"]["get"]
    assert {"200", "206", "416"} <= set(download["responses"])
