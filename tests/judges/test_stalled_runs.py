"""The periodic sweep of stalled filter runs (``judges.filter_runs_resume_stalled``): which runs
count as stalled, and each stalled run resumed once however many beats run at the same time.
A real worker with beat recovering a killed run is in test_run_worker.py."""

from __future__ import annotations

import threading
from datetime import timedelta
from itertools import count

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from judges import tasks
from judges.models import FilterRun, Verdict
from judges.runs import services as runs
from tests.factories import PairFactory
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    make_judges,
    use_scripted_judges,
)

STALLED_AFTER_S = 60
_judge_numbers = count()


@pytest.fixture
def resumes(monkeypatch, settings):
    """Runs that the sweep resumed, recorded instead of enqueueing their work."""
    settings.ARBITER_STALLED_AFTER_S = STALLED_AFTER_S
    resumed = []
    lock = threading.Lock()

    def record(run):
        with lock:
            resumed.append(run.pk)
        return 1

    monkeypatch.setattr(runs, "_enqueue_missing", record)
    return resumed


def make_run(project, *, status=FilterRun.Status.RUNNING, idle_s: float = 0) -> FilterRun:
    """A run of one judge over two pairs, with its last sign of life ``idle_s`` ago."""
    PairFactory.create_batch(2, project=project)
    judges = make_judges(f"judge-{next(_judge_numbers)}")
    run = runs.filter_run_create(project=project, judges=judges)
    since = timezone.now() - timedelta(seconds=idle_s)
    FilterRun.objects.filter(pk=run.pk).update(status=status, created_at=since, started_at=since)
    return run


@pytest.mark.django_db
def test_the_sweep_resumes_runs_without_progress_and_only_those(project, resumes):
    stalled = make_run(project, idle_s=2 * STALLED_AFTER_S)
    lost_start = make_run(project, status=FilterRun.Status.PENDING, idle_s=2 * STALLED_AFTER_S)
    busy = make_run(project, idle_s=2 * STALLED_AFTER_S)
    Verdict.objects.create(
        run=busy, judge=busy.judges.get(), pair=busy.pairs.first(), order="AB", outcome="abstain"
    )
    fresh = make_run(project, idle_s=STALLED_AFTER_S / 2)
    failed = make_run(project, status=FilterRun.Status.FAILED, idle_s=2 * STALLED_AFTER_S)

    tasks.filter_runs_resume_stalled.apply()

    assert sorted(resumes) == sorted([stalled.pk, lost_start.pk])
    lost_start.refresh_from_db()
    assert lost_start.status == FilterRun.Status.RUNNING
    assert lost_start.resumed_at is not None
    for untouched in (busy, fresh, failed):
        untouched.refresh_from_db()
        assert untouched.resumed_at is None
    failed.refresh_from_db()
    assert failed.status == FilterRun.Status.FAILED  # a real failure waits for a curator

    # a resume counts as progress: the next beat leaves the runs their time to move again
    tasks.filter_runs_resume_stalled.apply()
    assert sorted(resumes) == sorted([stalled.pk, lost_start.pk])


@pytest.mark.django_db
def test_the_run_page_offers_resume_after_the_same_time(
    project, carol, client_for, resumes, settings
):
    run = make_run(project, idle_s=STALLED_AFTER_S / 2)
    page = reverse("judges:run", args=[project.slug, run.number])
    assert "No new verdict for a while" not in client_for(carol).get(page).content.decode()
    settings.ARBITER_STALLED_AFTER_S = STALLED_AFTER_S / 4
    assert "No new verdict for a while" in client_for(carol).get(page).content.decode()


@pytest.mark.django_db(transaction=True)
def test_concurrent_beats_resume_a_stalled_run_once(project, resumes):
    run = make_run(project, idle_s=2 * STALLED_AFTER_S)
    resumes.clear()  # the start, published at once outside a test transaction
    beats = 4
    barrier = threading.Barrier(beats)
    errors = []

    def beat():
        try:
            barrier.wait()
            runs.filter_runs_resume_stalled()
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(beats)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert resumes == [run.pk]
