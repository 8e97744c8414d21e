"""A release's life (docs/releases.md): validation, building, publishing, and a published
release that never changes, refused by the services, the ORM and the admin alike."""

from __future__ import annotations

import time
from unittest import mock

import pytest
from django.db import transaction
from django.db.models import ProtectedError
from django.urls import reverse

from annotation.core.errors import Conflict, InvalidInput, Unavailable
from annotation.core.jobs import BrokerUnavailable
from annotation.models import Release, ReleaseFrozen
from annotation.releases.selection import check_selection
from annotation.releases.selectors import release_rows
from annotation.releases.services import (
    release_build,
    release_build_start,
    release_builds_fail_stalled,
    release_create,
    release_publish,
)
from annotation.releases.stored_archive import archive_index
from annotation.tasks import release_build_run
from tests.annotation.releases.conftest import archive_file
from tests.factories import PairFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided(project):
    """One consensus pair: a release of no pair is refused."""
    return PairFactory(project=project, status="consensus", consensus_label="A", task="a")


@pytest.fixture
def built(project, dave):
    PairFactory.create_batch(3, project=project, status="consensus", consensus_label="A")
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)
    return release_build(release=release)


@pytest.fixture
def published(built, dave):
    return release_publish(release=built, user=dave)


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ({"splits": "train=0.5,test=0.6"}, "splits: the ratios must add up to 1"),
        ({"splits": [{"name": "Train!", "ratio": 1}]}, "splits[0].name: a lowercase name"),
        (
            {"splits": [{"name": "a", "ratio": 0.5}, {"name": "a", "ratio": 0.5}]},
            "splits[1].name: 'a' is given twice",
        ),
        ({"splits": [{"name": "a", "ratio": "lots"}]}, "splits[0].ratio: must be a number"),
        ({"splits": "train"}, "splits: write each split as name=ratio"),
        ({"min_agreement": 1.5}, "min_agreement: must be from 0 to 1"),
        ({"min_agreement": "most"}, "min_agreement: must be a number"),
        ({"seed": -1}, "seed: must be a whole number"),
        ({"include_ties": "yes"}, "include_ties: must be true or false"),
        ({"tasks": [1, 2]}, "tasks: must be a list of strings"),
        ({"colour": "red"}, "colour: not a selection field"),
        (
            {"include_consensus": False, "include_adjudicated": False},
            "include_consensus: choose at least one source",
        ),
    ],
)
def test_a_bad_selection_is_refused_naming_the_field(selection, message):
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_selection(selection)


def test_the_selection_is_stored_normalised(project, decided, dave):
    release = release_create(
        project=project,
        version="0.1.0",
        selection={"tasks": "b,a", "splits": "train=0.9,test=0.1", "seed": "5"},
        user=dave,
    )
    assert release.selection["tasks"] == ["a", "b"]
    assert release.selection["splits"] == [
        {"name": "train", "ratio": 0.9},
        {"name": "test", "ratio": 0.1},
    ]
    assert release.selection["seed"] == 5
    assert release.status == Release.Status.DRAFT


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-rc1", "", "1.0.0.0"])
def test_versions_are_x_y_z(project, dave, version):
    with pytest.raises(InvalidInput, match=r"version: must be X\.Y\.Z"):
        release_create(project=project, version=version, selection={}, user=dave)


def test_a_version_is_unique_in_its_project(project, decided, other_project, dave):
    PairFactory(project=other_project, status="consensus", consensus_label="B")
    release_create(project=project, version="1.0.0", selection={}, user=dave)
    with pytest.raises(Conflict, match=r"version: demo has a release 1\.0\.0 already"):
        release_create(project=project, version="1.0.0", selection={}, user=dave)
    release_create(project=other_project, version="1.0.0", selection={}, user=dave)


def test_a_build_records_its_progress_and_results(built, tmp_path):
    assert built.status == Release.Status.BUILT
    assert (built.rows_done, built.rows_total, built.percent, built.stage) == (3, 3, 100, "done")
    assert built.build_started_at <= built.build_finished_at
    # The archive is made from the folder when read; its sha256 is taken at publishing.
    assert not built.archive_path.exists()
    assert archive_file(built, tmp_path).stat().st_size == built.archive_size
    assert built.archive_sha256 == ""
    assert len(built.manifest_sha256) == 64
    assert built.card.startswith("---\n")


def test_a_build_reports_progress_to_the_caller(project, dave):
    PairFactory.create_batch(2, project=project, status="consensus", consensus_label="B")
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)
    seen = []
    release_build(release=release, progress=lambda done, total, stage: seen.append(stage))
    assert seen[0] == "reading"
    assert seen[-1] == "archive"
    assert {"images", "card"} <= set(seen)


def test_a_failed_build_says_why_and_can_be_built_again(project, dave, monkeypatch):
    PairFactory(project=project, status="consensus", consensus_label="A")
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)

    def broken(**kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("annotation.releases.build.write_release", broken)
    with pytest.raises(OSError, match="disk full"):
        release_build(release=release)
    release.refresh_from_db()
    assert (release.status, release.error) == (Release.Status.FAILED, "OSError: disk full")
    assert not release.folder.exists()
    monkeypatch.undo()
    assert release_build(release=release).status == Release.Status.BUILT


def test_a_stalled_build_is_marked_failed(project, decided, dave, settings):
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)
    Release.objects.filter(pk=release.pk).update(status="building")
    settings.ARBITER_STALLED_AFTER_S = 0
    assert release_builds_fail_stalled() == 0  # no progress time yet: never started
    Release.objects.filter(pk=release.pk).update(progress_at="2020-01-01T00:00:00Z")
    assert release_builds_fail_stalled() == 1
    release.refresh_from_db()
    assert release.status == Release.Status.FAILED
    assert "worker died" in release.error


def test_only_a_built_release_is_published_and_its_files_must_verify(project, dave, built):
    draft = release_create(project=project, version="2.0.0", selection={}, user=dave)
    with pytest.raises(Conflict, match="draft: only a built release is published"):
        release_publish(release=draft, user=dave)
    with pytest.raises(Conflict, match="has no files yet"):
        list(release_rows(draft))
    target = built.folder / "README.md"
    target.write_text(target.read_text() + "edited")
    with pytest.raises(Conflict, match=r"README\.md: size"):
        release_publish(release=built, user=dave)
    built.refresh_from_db()
    assert built.status == Release.Status.BUILT


def test_publishing_freezes_the_release(published, dave):
    assert published.status == Release.Status.PUBLISHED
    assert published.published_by == dave
    assert published.published_at is not None
    assert len(list(release_rows(published))) == 3


def test_the_services_refuse_to_change_a_published_release(published, dave):
    with pytest.raises(Conflict, match="published: it cannot be built now"):
        release_build_start(release=published)
    with pytest.raises(Conflict, match="published: it cannot be built now"):
        release_build(release=published)
    with pytest.raises(Conflict, match="only a built release is published"):
        release_publish(release=published, user=dave)


def test_the_orm_refuses_to_change_a_published_release(published, built):
    published.version = "9.9.9"
    attempts = [
        (ReleaseFrozen, published.save),
        (ReleaseFrozen, Release.objects.get(pk=published.pk).delete),
        (ReleaseFrozen, lambda: Release.objects.filter(pk=published.pk).update(version="9.9.9")),
        (ReleaseFrozen, Release.objects.all().delete),
        (ReleaseFrozen, lambda: Release.objects.bulk_update([published], ["version"])),
        (ProtectedError, published.project.delete),
        (ProtectedError, published.created_by.delete),
    ]
    for error, attempt in attempts:
        # each in a savepoint: bulk_update's own atomic block is broken by the refusal
        with pytest.raises(error), transaction.atomic():
            attempt()
    stored = Release.objects.get(pk=published.pk)
    assert (stored.version, stored.status) == ("1.0.0", Release.Status.PUBLISHED)


def test_the_orm_still_changes_and_deletes_unpublished_releases(project, decided, dave):
    draft = release_create(project=project, version="1.0.0", selection={}, user=dave)
    draft.selection = {"seed": 1}
    draft.save(update_fields=["selection"])
    assert Release.objects.filter(pk=draft.pk).update(stage="x") == 1
    draft.delete()
    assert not Release.objects.exists()


def test_the_admin_shows_releases_read_only(published, client_for):
    operator = UserFactory(username="root", is_superuser=True, is_staff=True)
    client = client_for(operator)
    listing = client.get(reverse("admin:annotation_release_changelist"))
    assert listing.status_code == 200
    assert "1.0.0" in listing.content.decode()
    change_url = reverse("admin:annotation_release_change", args=[published.pk])
    page = client.get(change_url).content.decode()
    assert 'name="_save"' not in page
    assert client.post(change_url, {"version": "9.9.9"}).status_code == 403
    delete_url = reverse("admin:annotation_release_delete", args=[published.pk])
    assert client.post(delete_url, {"post": "yes"}).status_code == 403
    bulk = client.post(
        reverse("admin:annotation_release_changelist"),
        {"action": "delete_selected", "_selected_action": [published.pk], "post": "yes"},
    )
    assert bulk.status_code in (200, 302)
    assert client.get(reverse("admin:annotation_release_add")).status_code == 403
    assert Release.objects.get(pk=published.pk).version == "1.0.0"


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_builds_a_queued_release(celery_worker_process):
    project = ProjectFactory(slug="worker-release")
    researcher = UserFactory(username="researcher-w")
    PairFactory.create_batch(4, project=project, status="consensus", consensus_label="B")
    release = release_create(project=project, version="1.0.0", selection={}, user=researcher)
    celery_worker_process(queues="releases", concurrency=1)
    queued = release_build_start(release=release)
    assert queued.status == Release.Status.QUEUED
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        release.refresh_from_db()
        if release.status not in (Release.Status.QUEUED, Release.Status.BUILDING):
            break
        time.sleep(0.25)
    assert release.status == Release.Status.BUILT, release.error
    assert release.pair_count == 4
    assert archive_index(release) is not None
    manifest = release.manifest_sha256
    release_build_run(release.pk)  # the same task delivered again: the release is built
    release.refresh_from_db()
    assert (release.status, release.manifest_sha256) == (Release.Status.BUILT, manifest)


def test_starting_a_build_queues_it_and_the_task_builds_it(
    project, dave, django_capture_on_commit_callbacks
):
    PairFactory(project=project, status="consensus", consensus_label="A")
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)
    with django_capture_on_commit_callbacks(execute=True):
        queued = release_build_start(release=release)
        assert queued.status == Release.Status.QUEUED  # sent once the transaction commits
    release.refresh_from_db()
    assert release.status == Release.Status.BUILT
    assert release.pair_count == 1
    with django_capture_on_commit_callbacks(execute=True):
        release_build_start(release=release)  # a built release may be built again
    release.refresh_from_db()
    assert release.status == Release.Status.BUILT


def test_a_build_the_broker_cannot_take_goes_back_and_says_why(project, decided, dave, monkeypatch):
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)

    def broker_down(task, **options):
        raise BrokerUnavailable("The task queue is unreachable (connection refused).")

    monkeypatch.setattr("annotation.core.jobs.task_publish", broker_down)
    with (
        pytest.raises(Unavailable, match="unreachable"),
        mock.patch(
            "annotation.releases.services.transaction.get_connection",
            return_value=mock.Mock(in_atomic_block=False),
        ),
    ):
        release_build_start(release=release)
    release.refresh_from_db()
    assert release.status == Release.Status.DRAFT
    assert release.error == (
        "The task queue is unreachable (connection refused). The build was not started."
    )
