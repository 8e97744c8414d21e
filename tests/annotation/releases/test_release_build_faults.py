"""A release build's faults (docs/releases.md, "Building"): the work folder a killed build
leaves is removed by the next build and by Celery beat's sweep, and a database restart
during a build is recorded as the database error it is, not as a dead worker."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import OperationalError, connection
from django.urls import reverse
from django.utils import timezone

from annotation.core.jobs import quarantine_reason
from annotation.models import Release
from annotation.releases.build import BUILD_FOLDER
from annotation.releases.services import (
    RELEASE_BUILD_TASK,
    release_build,
    release_build_start,
    release_builds_fail_stalled,
    release_create,
)
from annotation.releases.stored_archive import archive_index
from tests.celery_worker import database_url_for_tests
from tests.factories import PairFactory, ReleaseFactory
from tests.job_deaths import deliver, die


def _release(project, dave, version: str = "1.0.0") -> Release:
    PairFactory.create_batch(3, project=project, status="consensus", consensus_label="A")
    return release_create(project=project, version=version, selection={}, user=dave)


def _left_by_a_killed_build(release: Release):
    """What a build SIGKILLed mid-way leaves: its work folder with the files written so far
    (its ``finally`` never ran)."""
    work = release.folder.parent / BUILD_FOLDER.format(
        release_id=release.pk, token=uuid.uuid4().hex
    )
    (work / "release" / "jsonl").mkdir(parents=True)
    (work / "release" / "jsonl" / "train.jsonl").write_bytes(b"{}\n" * 1000)
    (work / "parts").mkdir()
    return work


@pytest.mark.django_db
def test_the_next_build_removes_the_folder_a_killed_build_left(project, dave):
    release = _release(project, dave)
    left = _left_by_a_killed_build(release)
    release_build(release=release)
    assert not left.exists()
    assert [p.name for p in release.folder.parent.iterdir() if p.name.startswith(".")] == []


@pytest.mark.django_db
def test_the_sweep_removes_the_folders_of_builds_no_longer_running(
    project, other_project, dave, settings
):
    failed = _release(project, dave)
    release_build(release=failed)
    left = _left_by_a_killed_build(failed)
    gone = ReleaseFactory.build(pk=failed.pk + 1000, project=project)  # row deleted since
    left_by_deleted = _left_by_a_killed_build(gone)
    PairFactory(project=other_project, status="consensus", consensus_label="A")
    running = release_create(project=other_project, version="2.0.0", selection={}, user=dave)
    Release.objects.filter(pk=running.pk).update(status=Release.Status.BUILDING)
    in_use = _left_by_a_killed_build(running)  # a build at work, still making progress

    assert release_builds_fail_stalled() == 0
    assert not left.exists()
    assert not left_by_deleted.exists()
    assert in_use.exists()
    assert failed.folder.is_dir()
    assert archive_index(failed) is not None


def _terminate(backend_pid: int) -> None:
    """What a PostgreSQL restart does to a connection: the server ends its backend."""
    with psycopg.connect(database_url_for_tests(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [backend_pid])


@pytest.mark.django_db(transaction=True)  # the build runs outside a transaction, as a worker's
def test_a_database_restart_during_a_build_is_recorded_as_the_database_error(project, dave):
    release = _release(project, dave)
    terminated = []

    def restart_database(rows_done: int, rows_total: int, stage: str) -> None:
        if not terminated:  # the build's next statement finds its connection gone
            terminated.append(connection.connection.info.backend_pid)
            _terminate(terminated[0])

    with pytest.raises(OperationalError):
        release_build(release=release, progress=restart_database)
    release.refresh_from_db()
    assert release.status == Release.Status.FAILED
    assert release.error.startswith("The database connection failed (OperationalError: ")
    # the sweep does not overwrite it with a guess
    assert release_builds_fail_stalled() == 0
    release.refresh_from_db()
    assert "worker died" not in release.error
    assert [p.name for p in release.folder.parent.iterdir() if p.name.startswith(".")] == []
    # and it builds again once the database is back
    release_build_start(release=release)
    release.refresh_from_db()
    assert release.status == Release.Status.BUILT


@pytest.mark.django_db(transaction=True)
def test_a_task_that_failed_on_a_lost_connection_records_it_on_a_new_one(project, tmp_path):
    from judges import tasks
    from judges.models import TrainingRun
    from judges.reward_model.services import training_run_create
    from judges.reward_model.trainer import TrainingOptions
    from tests.judges.training_support import consensus_pairs_in, preference_pairs

    consensus_pairs_in(project, preference_pairs(10))
    run = training_run_create(
        project=project, options=TrainingOptions(), out_dir=str(tmp_path), enqueue=False
    )
    connection.ensure_connection()
    _terminate(connection.connection.info.backend_pid)
    lost = OperationalError("terminating connection due to administrator command")
    tasks.training_run_execute.on_failure(lost, "task-id", (), {"run_id": run.pk}, None)
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.FAILED
    assert run.error == (
        "The database connection failed (OperationalError: terminating connection due to "
        "administrator command)."
    )


@pytest.mark.django_db
def test_a_build_killed_twice_is_quarantined_and_never_built_again(
    project, dave, monkeypatch, client_for, django_capture_on_commit_callbacks
):
    from annotation.releases import build

    release = _release(project, dave)
    Release.objects.filter(pk=release.pk).update(status=Release.Status.QUEUED)
    monkeypatch.setattr(build, "build_release", die)
    for attempt in (1, 2):  # the second: the message redelivered, the release still building
        deliver(RELEASE_BUILD_TASK, kwargs={"release_id": release.pk}, dies=True)
        release.refresh_from_db()
        assert (release.status, release.attempts) == ("building", attempt)
    monkeypatch.setattr(build, "build_release", lambda **k: pytest.fail("a quarantined build ran"))

    deliver(RELEASE_BUILD_TASK, kwargs={"release_id": release.pk})

    release.refresh_from_db()
    assert (release.status, release.error) == ("failed", quarantine_reason(2))
    page = client_for(dave).get(reverse("release", args=[project.slug, release.version]))
    assert quarantine_reason(2) in page.content.decode()
    Release.objects.filter(pk=release.pk).update(progress_at=timezone.now() - timedelta(days=1))
    assert release_builds_fail_stalled() == 0  # nothing to recover: it is failed
    # a curator's Build again is a new job, with attempts of its own
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        release_build_start(release=release)
    release.refresh_from_db()
    assert (release.status, release.attempts) == ("built", 1)
