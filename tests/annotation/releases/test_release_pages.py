"""The Releases tab (docs/releases.md, "Pages"): the list, the new release form and its field
errors, the build's progress, the card and files before publishing, publishing with a
confirmation, downloads (archive with ranges, single files, CSV), the diff page, and who may
reach any of it."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Pair, PairStatus, Release
from annotation.releases.services import release_publish
from tests.annotation.releases.conftest import (
    ADJUDICATED_ID,
    TIE_ID,
    built_release,
)
from tests.factories import MembershipFactory, PairFactory, UserFactory

pytestmark = pytest.mark.django_db


def url(name: str, release: Release, *extra) -> str:
    return reverse(name, args=[release.project.slug, release.version, *extra])


def text_of(response) -> str:
    return response.content.decode()


def body_of(response) -> bytes:
    # The test client closes a streamed response once it has been read to the end.
    return b"".join(response.streaming_content)


def form_data(**changes) -> dict:
    data = {
        "version": "1.0.0",
        "include_consensus": "on",
        "include_adjudicated": "on",
        "splits": "test=1",
        "seed": "0",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


# ---- The list and the form ----


def test_the_list_shows_each_release_with_its_status(client_for, filled, dave):
    built_release(filled, dave, version="1.0.0")
    body = text_of(client_for(dave).get(reverse("releases", args=[filled.slug])))
    assert 'href="/p/demo/releases/1.0.0/"' in body
    assert "Built" in body
    assert "New release" in body


def test_the_form_offers_the_next_version_and_the_projects_tasks(client_for, filled, dave):
    built_release(filled, dave, version="1.2.3")
    body = text_of(client_for(dave).get(reverse("release-create", args=[filled.slug])))
    assert 'value="1.3.0"' in body
    for task in ("code", "text", "t2i"):
        assert f'value="{task}"' in body
    assert "(no criterion)" in body
    assert 'value="correctness"' in body


def test_creating_a_release_builds_it_and_opens_its_page(
    client_for, filled, dave, django_capture_on_commit_callbacks
):
    client = client_for(dave)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("release-create", args=[filled.slug]),
            form_data(include_ties="on", splits="train=0.5,test=0.5", seed="7", tasks="code"),
        )
    release = Release.objects.get(project=filled, version="1.0.0")
    assert response.status_code == 302
    assert response["Location"] == url("release", release)
    assert release.status == Release.Status.BUILT  # eager Celery in tests
    assert release.selection["include_ties"] is True
    assert release.selection["tasks"] == ["code"]
    assert [s["name"] for s in release.selection["splits"]] == ["train", "test"]
    assert release.selection["seed"] == 7
    assert release.created_by == dave


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"version": "1.0"}, "version", "must be X.Y.Z"),
        ({"version": "01.0.0"}, "version", "without leading zeros"),
        ({"splits": "train=0.5"}, "splits", "add up to 1"),
        ({"splits": "train=0.5,Test=0.5"}, "splits", "splits[1].name: a lowercase name"),
        ({"splits": "train"}, "splits", "name=ratio"),
        ({"min_agreement": "1.5"}, "min_agreement", "less than or equal to 1"),
        ({"seed": "-1"}, "seed", "greater than or equal to 0"),
        ({"tasks": "nope"}, "tasks", "not one of the available choices"),
        (
            {"include_consensus": None, "include_adjudicated": None},
            "include_consensus",
            "at least one source",
        ),
    ],
)
def test_bad_input_is_refused_on_its_field(client_for, filled, dave, changes, field, words):
    response = client_for(dave).post(
        reverse("release-create", args=[filled.slug]), form_data(**changes)
    )
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors, errors
    assert words in " ".join(errors[field])
    assert not Release.objects.exists()


def test_a_version_the_project_has_is_refused_on_the_version_field(client_for, filled, dave):
    built_release(filled, dave, version="1.0.0")
    response = client_for(dave).post(
        reverse("release-create", args=[filled.slug]), form_data(version="1.0.0")
    )
    assert response.status_code == 400
    assert "has a release 1.0.0 already" in " ".join(response.context["form"].errors["version"])
    assert Release.objects.count() == 1


# Outside a test transaction, as a request runs: the task is sent at once, not on commit.
@pytest.mark.django_db(transaction=True)
def test_when_the_task_queue_is_down_the_release_stays_a_draft_and_says_so(
    client_for, filled, dave, task_queue_down
):
    response = client_for(dave).post(
        reverse("release-create", args=[filled.slug]), form_data(), follow=True
    )
    release = Release.objects.get()
    assert release.status == Release.Status.DRAFT
    body = text_of(response)
    assert "saved as a draft, but its build could not be queued" in body
    assert ">Build</button>" in body


# ---- Build progress, card and files ----


def test_a_building_release_polls_its_progress(client_for, filled, dave):
    release = built_release(filled, dave)
    Release.objects.filter(pk=release.pk).update(
        status=Release.Status.BUILDING, stage="reading", rows_done=3, rows_total=10
    )
    client = client_for(dave)
    page = text_of(client.get(url("release", release)))
    assert 'hx-trigger="every 1s"' in page
    assert '<progress value="3" max="10">30%</progress>' in page
    assert "3 of 10 pairs" in page
    fragment = client.get(url("release", release), headers={"HX-Request": "true"})
    assert text_of(fragment).lstrip().startswith('<section id="release-build"')
    assert "<h1>" not in text_of(fragment)
    assert fragment["Vary"].count("HX-Request") == 1


def test_a_built_release_shows_its_card_and_files_before_publishing(client_for, filled, dave):
    release = built_release(filled, dave)
    body = text_of(client_for(dave).get(url("release", release)))
    assert "hx-trigger" not in body  # nothing to poll
    manifest = json.loads((release.folder / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        assert name in body
        assert entry["sha256"] in body
    assert release.manifest_sha256 in body
    assert "<h1>Demo project</h1>" in body  # the card's Markdown, rendered
    assert "pretty_name" in body  # the YAML front matter, shown as text
    assert "Publish 1.0.0" in body
    assert url("release-download", release) not in body  # no downloads before publishing


def test_the_card_is_rendered_safely(client_for, filled, dave):
    filled.name = '<script>alert("card")</script> Demo'
    filled.save(update_fields=["name"])
    release = built_release(filled, dave)
    assert "<script>" in release.card
    body = text_of(client_for(dave).get(url("release", release)))
    assert '<script>alert("card")</script>' not in body
    assert "&lt;script&gt;" in body


def test_a_failed_build_says_why_and_can_be_built_again(
    client_for, filled, dave, django_capture_on_commit_callbacks
):
    release = built_release(filled, dave)
    Release.objects.filter(pk=release.pk).update(
        status=Release.Status.FAILED, error="OSError: disk full"
    )
    client = client_for(dave)
    body = text_of(client.get(url("release", release)))
    assert "The build failed: OSError: disk full" in body
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("release-build", release))
    assert response.status_code == 302
    assert Release.objects.get(pk=release.pk).status == Release.Status.BUILT


# ---- Publishing ----


def test_publishing_needs_the_confirmation(client_for, filled, dave):
    release = built_release(filled, dave)
    response = client_for(dave).post(url("release-publish", release), {})
    assert response.status_code == 400
    assert "confirm" in response.context["publish_form"].errors
    assert Release.objects.get(pk=release.pk).status == Release.Status.BUILT


def test_publishing_freezes_the_release_and_opens_the_downloads(client_for, filled, dave):
    release = built_release(filled, dave)
    client = client_for(dave)
    response = client.post(url("release-publish", release), {"confirm": "on"}, follow=True)
    release.refresh_from_db()
    assert release.status == Release.Status.PUBLISHED
    assert release.published_by == dave
    body = text_of(response)
    assert "Release 1.0.0 is published." in body
    assert url("release-download", release) in body
    assert release.archive_sha256 in body
    assert url("release-file", release, "manifest.json") in body
    assert "Build again" not in body
    assert "Publish 1.0.0" not in body


def test_publishing_twice_is_refused_with_a_reason(client_for, published, dave):
    response = client_for(dave).post(url("release-publish", published), {"confirm": "on"})
    assert response.status_code == 409
    assert "only a built release is published" in text_of(response)


def test_a_published_release_cannot_be_built_again(client_for, published, dave):
    response = client_for(dave).post(url("release-build", published), follow=True)
    assert "it cannot be built now" in text_of(response)
    assert Release.objects.get(pk=published.pk).status == Release.Status.PUBLISHED


# ---- Downloads ----


def test_the_archive_downloads_whole_and_by_range(client_for, published, dave):
    client = client_for(dave)
    response = client.get(url("release-download", published))
    assert response.status_code == 200
    assert response.streaming
    data = body_of(response)
    assert hashlib.sha256(data).hexdigest() == published.archive_sha256
    assert len(data) == published.archive_size
    assert response["ETag"] == f'"{published.archive_sha256}"'
    assert response["Content-Disposition"] == 'attachment; filename="demo-1.0.0.tar.gz"'
    part = client.get(url("release-download", published), headers={"Range": "bytes=10-19"})
    assert part.status_code == 206
    assert body_of(part) == data[10:20]
    past = client.get(url("release-download", published), headers={"Range": "bytes=99999999-"})
    assert past.status_code == 416
    head = client.head(url("release-download", published))
    assert head.status_code == 200
    assert head["Content-Length"] == str(len(data))


def test_each_file_downloads_by_its_manifest_name(client_for, published, dave):
    client = client_for(dave)
    manifest = json.loads((published.folder / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        response = client.get(url("release-file", published, name))
        assert response.status_code == 200, name
        assert hashlib.sha256(body_of(response)).hexdigest() == entry["sha256"]
        assert response["ETag"] == f'"{entry["sha256"]}"'
    response = client.get(url("release-file", published, "manifest.json"))
    assert hashlib.sha256(body_of(response)).hexdigest() == published.manifest_sha256


@pytest.mark.parametrize(
    "name",
    [
        "../../../../etc/passwd",
        "data/../../demo-1.0.0.tar.gz",
        "%2e%2e/%2e%2e/demo-1.0.0.tar.gz",
        "/etc/passwd",
        "jsonl//test.jsonl",
        "./README.md",
        "not-listed.txt",
    ],
)
def test_a_file_name_the_manifest_does_not_list_is_404(client_for, published, dave, name):
    (published.folder / "not-listed.txt").write_text("secret")
    path = f"/p/{published.project.slug}/releases/{published.version}/files/{name}"
    assert client_for(dave).get(path).status_code == 404


def test_a_link_in_the_folder_is_not_followed_out_of_it(client_for, published, dave, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    manifest = json.loads((published.folder / "manifest.json").read_text())
    name = next(name for name in manifest["files"] if name.endswith(".jsonl"))
    client = client_for(dave)
    served = client.get(url("release-file", published, name))
    assert served.status_code == 200
    assert body_of(served)
    (published.folder / name).unlink()
    (published.folder / name).symlink_to(outside)
    assert client.get(url("release-file", published, name)).status_code == 404


def test_drafts_have_no_downloads(client_for, filled, dave):
    release = built_release(filled, dave)
    client = client_for(dave)
    for target in (
        url("release-download", release),
        url("release-csv", release),
        url("release-file", release, "manifest.json"),
    ):
        response = client.get(target)
        assert response.status_code == 409, target
        assert "downloads open once it is published" in text_of(response)


def read_csv(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body_of(response).decode())))


def test_the_csv_has_a_row_per_pair_with_formulas_defused(client_for, filled, dave):
    PairFactory(
        project=filled,
        external_id="=HYPERLINK(evil)",
        task="text",
        criterion="@SUM(A1)",
        status=PairStatus.CONSENSUS,
        consensus_label="A",
    )
    PairFactory(  # a formula after leading whitespace is still one to a spreadsheet
        project=filled,
        external_id=" =1+1",
        task=" \t+cmd",
        status=PairStatus.CONSENSUS,
        consensus_label="B",
    )
    release = release_publish(release=built_release(filled, dave), user=dave)
    response = client_for(dave).get(url("release-csv", release))
    assert response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="demo-1.0.0.csv"'
    rows = read_csv(response)
    assert len(rows) == release.pair_count
    hostile = next(row for row in rows if row["id"] == "'=HYPERLINK(evil)")
    assert hostile["criterion"] == "'@SUM(A1)"
    assert hostile["label"] == "A"
    assert hostile["source"] == "consensus"
    spaced = next(row for row in rows if row["id"] == "' =1+1")
    assert spaced["task"] == "' \t+cmd"
    adjudicated = next(row for row in rows if row["id"] == ADJUDICATED_ID)
    assert adjudicated["source"] == "adjudicated"
    assert adjudicated["chosen"].startswith("beta answers")
    assert adjudicated["votes"] == "3 1 2"


# ---- The diff ----


def test_the_diff_page_lists_pairs_added_removed_and_relabelled(client_for, filled, dave):
    built_release(filled, dave, version="1.0.0")
    Pair.objects.filter(project=filled, external_id="rel-00").update(consensus_label="B")
    Pair.objects.filter(project=filled, external_id="rel-01").update(status=PairStatus.DISPUTED)
    second = built_release(filled, dave, version="1.1.0", include_ties=True)
    client = client_for(dave)
    page = text_of(client.get(url("release", second)))
    assert '<option value="1.0.0">1.0.0</option>' in page
    response = client.get(url("release-diff", second), {"against": "1.0.0"})
    assert response.status_code == 200
    diff = response.context["diff"]
    assert [entry.id for entry in diff.added] == [TIE_ID]
    assert [entry.id for entry in diff.removed] == ["rel-01"]
    assert [(e.id, e.before, e.after) for e in diff.relabelled] == [("rel-00", "A", "B")]
    body = text_of(response)
    assert '<strong data-count="added">1</strong> added' in body
    assert f'href="/p/demo/pairs/id/{TIE_ID}"' in body


@pytest.mark.parametrize(("against", "status"), [("", 404), ("9.9.9", 404), ("1.0.0", 409)])
def test_the_diff_against_a_missing_or_unbuilt_release_says_why(
    client_for, filled, dave, against, status
):
    from annotation.releases.services import release_create

    second = built_release(filled, dave, version="1.1.0")
    release_create(project=filled, version="1.0.0", selection={}, user=dave)  # a draft
    response = client_for(dave).get(url("release-diff", second), {"against": against})
    assert response.status_code == status
    assert response.context["error"]


# ---- Who may reach it ----


def release_pages(release: Release) -> list[tuple[str, str]]:
    """(method, path) of every release page."""
    slug = release.project.slug
    return [
        ("get", reverse("releases", args=[slug])),
        ("get", reverse("release-create", args=[slug])),
        ("post", reverse("release-create", args=[slug])),
        ("get", url("release", release)),
        ("post", url("release-build", release)),
        ("post", url("release-publish", release)),
        ("get", url("release-download", release)),
        ("get", url("release-file", release, "manifest.json")),
        ("get", url("release-csv", release)),
        ("get", url("release-diff", release) + "?against=1.0.0"),
    ]


@pytest.mark.parametrize(("persona", "status"), [("alice", 403), ("eve", 404)])
def test_annotators_get_403_and_outsiders_404_on_every_release_page(
    request, client_for, published, persona, status
):
    client = client_for(request.getfixturevalue(persona))
    for method, path in release_pages(published):
        assert getattr(client, method)(path).status_code == status, (method, path)
    assert Release.objects.count() == 1


def test_a_curator_may_make_and_download_releases(client_for, published, carol):
    client = client_for(carol)
    assert client.get(reverse("releases", args=["demo"])).status_code == 200
    download = client.get(url("release-download", published))
    assert download.status_code == 200
    assert hashlib.sha256(body_of(download)).hexdigest() == published.archive_sha256


def test_anonymous_visitors_are_sent_to_log_in(client, published):
    for method, path in release_pages(published):
        response = getattr(client, method)(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


def test_another_projects_researcher_cannot_reach_them_by_version_or_path(
    client_for, published, other_project
):
    stranger = UserFactory(username="oscar")
    MembershipFactory(project=other_project, user=stranger, role="researcher")
    client = client_for(stranger)
    for method, path in release_pages(published):
        assert getattr(client, method)(path).status_code == 404, (method, path)
    # The same version in their own project is theirs, not demo's.
    crafted = f"/p/{other_project.slug}/releases/1.0.0/files/../../demo/1.0.0/manifest.json"
    assert client.get(crafted).status_code == 404


def test_posts_need_the_csrf_token(published, dave, filled):
    client = Client(enforce_csrf_checks=True)
    client.force_login(dave)
    assert client.post(url("release-publish", published), {"confirm": "on"}).status_code == 403
    assert (
        client.post(reverse("release-create", args=["demo"]), form_data(version="2.0.0"))
    ).status_code == 403
    assert client.post(url("release-build", published)).status_code == 403
    assert Release.objects.count() == 1
