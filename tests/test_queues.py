"""Queues by kind (config/queues.py, docs/deploy.md "Queues and workers"): every task goes to
the queue of its kind, every worker command serves them all or its own, and a release is
built by its own worker while the imports' worker is held by a long import."""

from __future__ import annotations

import contextlib
import inspect
import re
import threading
import time
from pathlib import Path

import psutil
import pytest
import redis
from django.db import connection, connections, transaction

from annotation.imports.services import import_job_submit
from annotation.models import ImportJob, Release, Role
from annotation.releases.services import release_build_start, release_create
from config.celery import app
from config.queues import ALL_QUEUES, IMPORTS, JUDGES_GPU, MAIL, QUEUES, RELEASES, TRAINING
from judges.models import Judge
from tests.annotation.imports.conftest import jsonl_bytes, text_pair, upload
from tests.celery_worker import WorkerProcess
from tests.factories import MembershipFactory, PairFactory, ProjectFactory, UserFactory

ROOT = Path(__file__).resolve().parent.parent


def _arbiter_tasks() -> list[str]:
    app.loader.import_default_modules()
    return sorted(name for name in app.tasks if name.startswith(("annotation.", "judges.")))


def _routed_queue(name: str, **options) -> str:
    """The queue Celery sends task ``name`` to with these ``apply_async`` options."""
    return app.amqp.router.route(options, name, (), {})["queue"].name


def test_every_registered_task_is_routed_to_the_queue_of_its_kind():
    tasks = _arbiter_tasks()
    assert len(tasks) >= 14
    queues = {name: _routed_queue(name) for name in tasks}
    assert set(queues.values()) <= set(QUEUES), queues
    assert queues["annotation.tasks.import_run"] == IMPORTS
    assert queues["annotation.tasks.release_build_run"] == RELEASES
    assert queues["annotation.agreement_report_refresh"] == RELEASES
    assert queues["judges.training_run_execute"] == TRAINING
    assert queues["annotation.mail_send"] == MAIL
    # each stalled-job sweep runs beside the jobs it recovers
    assert queues["annotation.imports_resume_stalled"] == IMPORTS
    assert queues["judges.training_runs_resume_stalled"] == TRAINING


def test_a_torch_judges_batches_go_to_the_gpu_queue_whatever_the_route_says():
    judge = Judge(kind=Judge.Kind.REWARD_MODEL)
    assert _routed_queue("judges.filter_run_batch", queue=judge.queue) == JUDGES_GPU
    assert _routed_queue("judges.judge_evaluation_batch", queue=judge.queue) == JUDGES_GPU


def test_the_demo_and_the_test_workers_serve_every_queue():
    makefile = (ROOT / "Makefile").read_text()
    served = re.findall(r"celery -A config worker .*?-Q (\S+)", makefile)
    assert served == [ALL_QUEUES]
    assert inspect.signature(WorkerProcess).parameters["queues"].default == ALL_QUEUES


def _import_row_locked(job_id: int, locked: threading.Event, done: threading.Event) -> None:
    """Holds the import job's row (as a long import holds its worker) until ``done``."""
    try:
        with transaction.atomic():
            ImportJob.objects.select_for_update().get(pk=job_id)
            locked.set()
            done.wait(120)
    finally:
        connection.close()


def _waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def _wait_for(condition, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {condition}")


def _pool_processes_mapping_arrow(worker: WorkerProcess) -> tuple[int, int]:
    """How many of the worker's pool processes there are, and how many have pyarrow's library
    mapped."""
    pool = psutil.Process(worker.process.pid).children()
    mapping = 0
    for process in pool:
        with contextlib.suppress(psutil.Error):
            mapping += any("libarrow" in region.path for region in process.memory_maps())
    return len(pool), mapping


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_takes_release_builds_imports_the_builder_as_its_pool_processes_start(
    celery_worker_process,
):
    """Before any build, so that no build pays the import (docs/releases.md, "Speed"); a
    worker of other queues does not load it."""
    builder = celery_worker_process(queues=RELEASES, concurrency=2)
    other = celery_worker_process(queues=MAIL, concurrency=1)
    _wait_for(lambda: _pool_processes_mapping_arrow(builder) == (2, 2))
    _wait_for(lambda: "ready" in other.log())
    assert _pool_processes_mapping_arrow(other) == (1, 0)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_release_is_built_while_the_import_queue_is_held_by_a_long_import(
    celery_worker_process, settings
):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10  # every upload is a job for the workers
    project = ProjectFactory(slug="queues-by-kind")
    curator = UserFactory(username="curator-q")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    PairFactory.create_batch(4, project=project, status="consensus", consensus_label="A")
    celery_worker_process(queues=IMPORTS, concurrency=1)
    celery_worker_process(queues=RELEASES, concurrency=1)

    def submit(name: str) -> ImportJob:
        data = jsonl_bytes([text_pair(f"{name}-{i}") for i in range(5)])
        return import_job_submit(project=project, user=curator, upload=upload(name, data))

    first = submit("first.jsonl")
    locked, done = threading.Event(), threading.Event()
    holder = threading.Thread(target=_import_row_locked, args=(first.pk, locked, done))
    holder.start()
    try:
        assert locked.wait(30)
        _wait_for(_waiting_on_a_lock)  # the imports' one worker is inside the first import
        second = submit("second.jsonl")
        broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        assert broker.llen(IMPORTS) == 1  # and the second waits behind it

        release = release_create(project=project, version="1.0.0", selection={}, user=curator)
        release_build_start(release=release)
        built = _wait_for(
            lambda: Release.objects.filter(pk=release.pk, status=Release.Status.BUILT).first()
        )
        assert built.pair_count == 4
        assert ImportJob.objects.filter(pk__in=[first.pk, second.pk], finished_at=None).count() == 2
    finally:
        done.set()
        holder.join(30)
    for job in (first, second):
        _wait_for(lambda job=job: ImportJob.objects.get(pk=job.pk).finished)
        job.refresh_from_db()
        assert (job.status, job.created_pairs) == ("succeeded", 5), job.errors
    connections.close_all()
