"""Fixtures shared by the annotation packages' tests: a project with something of every kind to
release, its published release, and a task broker that refuses (docs/releases.md)."""

from __future__ import annotations

import pytest

from annotation.core.jobs import BrokerUnavailable
from annotation.releases.services import release_publish
from tests.annotation.releases.conftest import built_release, releasable_project


@pytest.fixture
def filled(project, alice, bob, carol):
    """The project with something of every kind to release (``releasable_project``)."""
    releasable_project(project, alice, bob, carol)
    return project


@pytest.fixture
def published(filled, dave):
    """Release 1.0.0 of ``filled``, built and published by dave."""
    return release_publish(release=built_release(filled, dave), user=dave)


@pytest.fixture
def task_queue_down(monkeypatch):
    """The task broker refuses every task, as ``annotation.core.broker`` reports it."""

    def refuse(*args, **kwargs):
        raise BrokerUnavailable("The task queue is unreachable (connection refused).")

    monkeypatch.setattr("annotation.core.jobs.task_publish", refuse)
