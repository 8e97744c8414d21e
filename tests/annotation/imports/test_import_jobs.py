"""An import job's bounds (issue 31; docs/operations.md, "Time limits, attempts and
quarantine"): each run counts its attempt in the database before any work, a job whose worker
was killed twice is quarantined and never runs again (not by the sweep, not by the broker's
redelivery), the project's import lock is tried, never waited for, so one project's busy
import holds back neither a worker nor another project's import, and work folders that a
killed worker left are swept when a worker starts."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from celery.exceptions import Retry, SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from annotation import tasks
from annotation.core import storage
from annotation.core.broker import registered_task
from annotation.core.jobs import quarantine_reason
from annotation.core.scratch import SCRATCH_PREFIX, scratch_sweep
from annotation.imports import importer, locks
from annotation.imports import services as import_services
from annotation.imports.locks import ProjectBusy, project_import_lock
from annotation.imports.services import (
    IMPORT_RUN_TASK,
    import_job_run,
    import_job_submit,
    import_jobs_resume_stalled,
)
from annotation.models import ImportJob, Pair, Role
from tests.annotation.imports.conftest import (
    jsonl_bytes,
    leftover_uploads,
    text_pair,
    upload,
    wait_for_uploads_removed,
)
from tests.celery_worker import database_url_for_tests, time_limits_env
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

QUARANTINED = quarantine_reason(2)


def _stored_job(project, pairs: list[dict] | None = None, **fields) -> ImportJob:
    """A job with its uploaded file stored, as ``import_job_submit`` leaves a large one."""
    folder = Path(settings.MEDIA_ROOT) / ".uploads" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    path = folder / "pairs-p.jsonl"
    path.write_bytes(jsonl_bytes(pairs or [text_pair("p1"), text_pair("p2")]))
    key = str(path.relative_to(storage.local_root("uploads")))
    return ImportJob.objects.create(project=project, filename="p.jsonl", upload_path=key, **fields)


# Attempts and quarantine -----------------------------------------------------------------


def test_a_run_counts_its_attempt(project):
    job = import_job_run(job=_stored_job(project))
    assert (job.status, job.created_pairs, job.attempts) == ("succeeded", 2, 1)
    assert job.last_attempt_at is not None


@pytest.mark.django_db(transaction=True)
def test_the_attempt_is_committed_before_the_work_and_outlives_its_rollback(monkeypatch):
    project = ProjectFactory(slug="attempts")
    seen = []

    def crash(*args, **kwargs):
        # what another session (the sweep, the next run) sees while the import works
        with psycopg.connect(database_url_for_tests()) as other:
            seen.append(
                other.execute(
                    "SELECT attempts FROM annotation_importjob WHERE id = %s", [job.pk]
                ).fetchone()[0]
            )
        raise RuntimeError("the worker's process dies here")

    monkeypatch.setattr(importer, "pair_spec", crash)
    job = _stored_job(project)
    with pytest.raises(RuntimeError):
        registered_task(IMPORT_RUN_TASK).apply(args=(job.pk,))
    job.refresh_from_db()
    assert seen == [1]
    assert (job.status, job.attempts) == ("failed", 1)
    assert not Pair.objects.filter(project=project).exists()


def test_a_job_out_of_attempts_is_quarantined_and_does_no_work(project, monkeypatch):
    job = _stored_job(project, status="running", attempts=2)

    def never(*args, **kwargs):
        raise AssertionError("a quarantined job must not run")

    monkeypatch.setattr(import_services, "pairs_import", never)
    registered_task(IMPORT_RUN_TASK).apply(args=(job.pk,))  # the broker's redelivery
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("failed", 2)
    assert job.errors == [{"line": None, "field": None, "message": QUARANTINED}]
    assert leftover_uploads() == []
    registered_task(IMPORT_RUN_TASK).apply(args=(job.pk,))  # and once more: nothing changes
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("failed", 2)


def test_the_quarantine_reason_is_on_the_jobs_page_and_in_the_api(
    client_for, api_for, carol, project
):
    job = _stored_job(project, status="running", attempts=2)
    import_job_run(job=job)
    status = client_for(carol).get(reverse("import-status", args=[project.slug, job.pk]))
    assert QUARANTINED in status.content.decode()
    body = api_for(carol).get(f"/api/v1/projects/{project.slug}/imports/{job.pk}/").json()
    assert (body["status"], body["attempts"]) == ("failed", 2)
    assert body["errors"][0]["message"] == QUARANTINED


def test_the_sweep_quarantines_a_job_out_of_attempts_instead_of_sending_it(
    project, settings, monkeypatch
):
    settings.ARBITER_STALLED_AFTER_S = 60
    old = timezone.now() - timedelta(seconds=61)
    spent = _stored_job(project, status="running", attempts=2, progress_at=old)
    once = _stored_job(project, status="running", attempts=1, progress_at=old)
    sent = []
    monkeypatch.setattr(import_services, "_enqueue", sent.append)
    assert sorted(import_jobs_resume_stalled()) == sorted([spent.pk, once.pk])
    assert sent == [once.pk]  # killed once: it runs again
    spent.refresh_from_db()
    assert (spent.status, spent.errors[0]["message"]) == ("failed", QUARANTINED)
    assert import_jobs_resume_stalled() == []


def test_a_soft_time_limit_fails_the_import_saying_which_limit(project, monkeypatch):
    def too_slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(importer, "pair_spec", too_slow)
    job = _stored_job(project)
    outcome = registered_task(IMPORT_RUN_TASK).apply(args=(job.pk,), throw=False)
    assert isinstance(outcome.result, SoftTimeLimitExceeded)
    job.refresh_from_db()
    limit, _ = settings.ARBITER_TASK_TIME_LIMITS["import"]
    assert job.status == "failed"
    assert job.errors[0]["message"] == (
        f"Took longer than {limit // 60} minutes, the import limit (ARBITER_IMPORT_TIME_LIMIT_S)."
    )
    assert leftover_uploads() == []
    assert not Pair.objects.filter(project=project).exists()


# The project's import lock -----------------------------------------------------------------


class _LockHolder(threading.Thread):
    """Holds a project's import lock on its own database connection, as a running import
    does, until ``release`` is set."""

    def __init__(self, project):
        super().__init__(daemon=True)
        self.project = project
        self.held = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with project_import_lock(self.project):
                self.held.set()
                self.release.wait(30)
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.held.set()
        finally:
            connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_busy_project_neither_waits_nor_holds_back_another_projects_import():
    busy, free = ProjectFactory(slug="busy"), ProjectFactory(slug="free")
    holder = _LockHolder(busy)
    holder.start()
    assert holder.held.wait(10)
    assert holder.error is None
    try:
        old = timezone.now() - timedelta(hours=1)
        waiting = _stored_job(busy, progress_at=old)
        started = time.monotonic()
        with pytest.raises(ProjectBusy):
            import_job_run(job=waiting)
        assert time.monotonic() - started < 2  # refused at once, not after the other import
        waiting.refresh_from_db()
        assert (waiting.status, waiting.attempts) == ("pending", 0)  # no attempt spent
        assert waiting.progress_at > old  # waiting is no stall: the sweep leaves it alone
        other = import_job_run(job=_stored_job(free))
        assert (other.status, other.created_pairs) == ("succeeded", 2)
    finally:
        holder.release.set()
        holder.join(10)
    assert import_job_run(job=waiting).status == "succeeded"
    # the lock went back at the end of each import: a third import takes it at once
    with project_import_lock(busy), project_import_lock(free):
        pass


@pytest.mark.django_db(transaction=True)
def test_the_lock_is_given_back_when_the_import_fails(monkeypatch):
    project = ProjectFactory(slug="fails")

    def crash(*args, **kwargs):
        raise RuntimeError("a bug in the importer")

    monkeypatch.setattr(importer, "pair_spec", crash)
    with pytest.raises(RuntimeError):
        import_job_run(job=_stored_job(project))
    holder = _LockHolder(project)
    holder.start()
    assert holder.held.wait(10)
    holder.release.set()
    holder.join(10)
    assert holder.error is None


@pytest.mark.django_db(transaction=True)
def test_the_task_of_a_busy_project_goes_back_to_the_queue(monkeypatch, settings):
    settings.ARBITER_IMPORT_BUSY_RETRY_S = 7
    project = ProjectFactory(slug="requeued")
    retried = []

    def retry(**options):
        retried.append(options)
        return Retry("sent again", when=options["countdown"])

    monkeypatch.setattr(tasks.import_run, "retry", retry)
    holder = _LockHolder(project)
    holder.start()
    assert holder.held.wait(10)
    try:
        job = _stored_job(project)
        with pytest.raises(Retry):
            tasks.import_run.apply(args=(job.pk,), throw=True)
    finally:
        holder.release.set()
        holder.join(10)
    assert len(retried) == 1
    assert retried[0]["max_retries"] is None
    assert 7 <= retried[0]["countdown"] <= 14
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("pending", 0)


@pytest.mark.django_db(transaction=True)
def test_a_small_api_import_into_a_busy_project_is_queued_instead_of_waiting(monkeypatch):
    sent = []
    monkeypatch.setattr(import_services, "_enqueue", lambda job_id, **how: sent.append(job_id))
    project = ProjectFactory(slug="busy-api")
    curator = UserFactory(username="curator-b")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    holder = _LockHolder(project)
    holder.start()
    assert holder.held.wait(10)
    try:
        started = time.monotonic()
        job = import_job_submit(
            project=project, user=curator, upload=upload("p.jsonl", jsonl_bytes([text_pair("a")]))
        )
        assert time.monotonic() - started < 2
        job.refresh_from_db()
        assert (job.status, job.attempts) == ("pending", 0)
        assert sent == [job.pk]
    finally:
        holder.release.set()
        holder.join(10)


# Work folders ------------------------------------------------------------------------------


def _aged(path: Path, seconds: float) -> Path:
    when = time.time() - seconds
    os.utime(path, (when, when))
    return path


def _old(path: Path, *, folder: bool = False, inside: str = "") -> Path:
    """``path`` made (a folder, with the file ``inside``, or a file) two hours old."""
    if folder:
        path.mkdir(parents=True)
        if inside:
            _aged(_write(path / inside), 7200)
    else:
        _write(path)
    return _aged(path, 7200)


def _write(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_the_sweep_removes_only_arbiters_old_work_folders(tmp_path, monkeypatch):
    import tempfile

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    media = Path(settings.MEDIA_ROOT)
    unpacked = _old(media / ".unpacked" / "old", folder=True, inside="a.png")
    transcode = _old(media / ".staging" / "transcode-ab")
    ours = _old(temp / f"{SCRATCH_PREFIX}glb-0f", folder=True, inside="served.glb")
    served = _old(temp / f"served-{'c' * 32}")
    young = media / ".staging" / "young"
    young.mkdir(parents=True)
    # an old folder of Arbiter's whose job still writes into it
    busy = _old(media / ".unpacked" / "busy", folder=True)
    _write(busy / "new.png")
    # not ours: another program's file, the local PostgreSQL's folder
    theirs = [_old(temp / "served-notes.txt"), _old(temp / "arbiter-pg-1234", folder=True)]
    removed = scratch_sweep(older_than_s=3600)
    assert sorted(removed) == sorted([unpacked, transcode, ours, served])
    assert young.exists()
    assert busy.exists()
    assert all(path.exists() for path in theirs)


def test_the_default_age_is_the_longest_job(settings, tmp_path):
    settings.ARBITER_TASK_TIME_LIMITS = {"import": (100, "X"), "training": (300, "Y")}
    settings.ARBITER_TASK_KILL_AFTER_S = 10
    folder = Path(settings.MEDIA_ROOT) / ".unpacked" / "f"
    folder.mkdir(parents=True)
    _aged(folder, 300)
    assert scratch_sweep() == []
    _aged(folder, 320)
    assert scratch_sweep() == [folder]


# Through a real worker (Redis) -------------------------------------------------------------

# Limits short enough for a test: every kind's, below a visibility timeout of 10 s.
_SHORT_LIMITS = {
    **time_limits_env(5),
    "ARBITER_IMPORT_TIME_LIMIT_S": "7",
    "ARBITER_TASK_KILL_AFTER_S": "1",
    "CELERY_VISIBILITY_S": "10",
    "ARBITER_IMPORT_BUSY_RETRY_S": "1",
}


def _wait_for(condition, *, timeout: float, what: str, log=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} (after {timeout} s)\n{log()}"
        time.sleep(0.1)


def _curator_project(slug: str):
    project = ProjectFactory(slug=slug)
    curator = UserFactory(username=f"curator-{slug}")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    return project, curator


def _queued(project, curator, pairs: list[dict]) -> ImportJob:
    """An import sent to the queue, as a large upload through the API is."""
    job = import_job_submit(
        project=project, user=curator, upload=upload("p.jsonl", jsonl_bytes(pairs))
    )
    assert job.status == "pending"
    return job


def _forget_unacknowledged_tasks() -> None:
    """A killed worker's unacknowledged messages would reach a later test's worker."""
    from config.celery import app

    with app.connection_for_write() as conn:
        channel = conn.default_channel
        channel.client.delete(channel.unacked_key, channel.unacked_index_key)


@pytest.mark.redis
@pytest.mark.timeout(150)
@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_is_killed_twice_is_quarantined_and_never_runs_again(
    celery_worker_process, settings, tmp_path
):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    project, curator = _curator_project("poisoned")
    job = _queued(project, curator, [text_pair("p1")])
    # Its file never ends: a named pipe nobody writes to, so the import hangs in its read,
    # as it would in a parser that never returns.
    stored = storage.local_root("uploads") / job.upload_path
    stored.unlink()
    os.mkfifo(stored)
    # What a killed worker left on this node: swept when the next worker starts.
    temp = tmp_path / "node-tmp"
    temp.mkdir()
    leftover = _old(temp / f"{SCRATCH_PREFIX}import-1", folder=True, inside="a.png")
    unpacked = _old(Path(settings.MEDIA_ROOT) / ".unpacked" / "killed", folder=True)
    env = {**_SHORT_LIMITS, "TMPDIR": str(temp)}

    def attempts() -> int:
        job.refresh_from_db()
        return job.attempts

    try:
        for attempt in (1, 2):
            worker = celery_worker_process(queues="imports", concurrency=1, extra_env=env)
            # the first takes the message at once; the next gets it back from Redis once the
            # visibility timeout has passed
            _wait_for(lambda n=attempt: attempts() == n, timeout=40, what="no run", log=worker.log)
            assert job.status == "running"
            worker.kill()
        assert not leftover.exists()
        assert not unpacked.exists()
        restarted = time.monotonic()
        worker = celery_worker_process(queues="imports", concurrency=1, extra_env=env)
        _wait_for(
            lambda: attempts() == 2 and job.status == "failed",
            timeout=60,
            what="the job was not quarantined",
            log=worker.log,
        )
        assert time.monotonic() - restarted < 60
        assert job.errors == [{"line": None, "field": None, "message": QUARANTINED}]
        # Nothing runs it again: not the broker (its message was acknowledged), not the sweep.
        from config.celery import app

        app.send_task("annotation.imports_resume_stalled")
        time.sleep(12)  # past the visibility timeout
        job.refresh_from_db()
        assert (job.status, job.attempts) == ("failed", 2)
        assert worker.log().count("annotation.tasks.import_run[") <= 2  # received, succeeded
        assert leftover_uploads() == []
    finally:
        _forget_unacknowledged_tasks()


@pytest.mark.redis
@pytest.mark.timeout(120)
@pytest.mark.django_db(transaction=True)
def test_a_hanging_import_is_stopped_by_its_time_limit_and_the_next_one_runs(
    celery_worker_process, settings, monkeypatch
):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    # A message carries the limits of the process that sends it (this one, as the web
    # process would, with the worker's settings).
    monkeypatch.setattr(tasks.import_run, "soft_time_limit", 7)
    monkeypatch.setattr(tasks.import_run, "time_limit", 8)
    monkeypatch.setattr(tasks.import_run, "_exec_options", None)  # Celery's cache of them
    hung_project, hung_curator = _curator_project("hangs")
    next_project, next_curator = _curator_project("next")
    hung = _queued(hung_project, hung_curator, [text_pair("h1")])
    stored = storage.local_root("uploads") / hung.upload_path
    stored.unlink()
    os.mkfifo(stored)  # a read that never returns
    after = _queued(next_project, next_curator, [text_pair("n1")])
    started = time.monotonic()
    worker = celery_worker_process(queues="imports", concurrency=1, extra_env=_SHORT_LIMITS)

    def finished(job: ImportJob) -> bool:
        job.refresh_from_db()
        return job.finished

    _wait_for(lambda: finished(hung), timeout=40, what="never stopped", log=worker.log)
    assert hung.status == "failed"
    assert hung.errors[0]["message"] == (
        "Took longer than 7 seconds, the import limit (ARBITER_IMPORT_TIME_LIMIT_S)."
    )
    assert hung.attempts == 1
    # the one worker slot is free again: the import queued behind it runs
    _wait_for(lambda: finished(after), timeout=30, what="held back", log=worker.log)
    assert (after.status, after.created_pairs) == ("succeeded", 1)
    assert time.monotonic() - started < 60
    wait_for_uploads_removed()


@pytest.mark.redis
@pytest.mark.timeout(120)
@pytest.mark.django_db(transaction=True)
def test_a_project_whose_import_lock_is_held_does_not_hold_back_another_projects_import(
    celery_worker_process, settings
):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    busy, busy_curator = _curator_project("locked")
    free, free_curator = _curator_project("unlocked")
    # Another import into ``busy`` is running (its lock held by another session).
    holder = psycopg.connect(database_url_for_tests(), autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s, %s)", [locks._LOCK_NAMESPACE, busy.pk])
    try:
        waiting = _queued(busy, busy_curator, [text_pair("b1")])
        other = _queued(free, free_curator, [text_pair("f1"), text_pair("f2")])
        worker = celery_worker_process(queues="imports", concurrency=1, extra_env=_SHORT_LIMITS)

        def finished(job: ImportJob) -> bool:
            job.refresh_from_db()
            return job.finished

        # one worker slot: the busy project's job gave it up instead of waiting
        _wait_for(lambda: finished(other), timeout=40, what="blocked", log=worker.log)
        assert (other.status, other.created_pairs) == ("succeeded", 2)
        waiting.refresh_from_db()
        assert (waiting.status, waiting.attempts) == ("pending", 0)
    finally:
        holder.close()  # the other import ends: its session's lock goes with it
    _wait_for(lambda: finished(waiting), timeout=30, what="never imported", log=worker.log)
    assert (waiting.status, waiting.created_pairs, waiting.attempts) == ("succeeded", 1, 1)
