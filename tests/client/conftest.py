"""The Python client (client/) against a live gunicorn (tests/live_gunicorn.py) on the test
database, Celery tasks run eagerly inside the server's requests; tokens for the personas."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections
from rest_framework.authtoken.models import Token

from annotation.models import Role
from tests.celery_worker import database_url_for_tests
from tests.factories import MembershipFactory, UserFactory
from tests.live_gunicorn import LiveGunicorn

JUDGE = "heuristic-sanity"


@pytest.fixture
def live_server_for(transactional_db, settings) -> Iterator[Callable[..., LiveGunicorn]]:
    """``live_server_for(**env)``: gunicorn serving the test database and this test's media
    and release folders, stopped after the test."""
    started: list[LiveGunicorn] = []

    def start(**extra_env: str) -> LiveGunicorn:
        env = {
            "CELERY_TASK_ALWAYS_EAGER": "true",
            "ARBITER_MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "ARBITER_RELEASE_ROOT": str(settings.ARBITER_RELEASE_ROOT),
            **extra_env,
        }
        connections.close_all()
        server = LiveGunicorn(database_url=database_url_for_tests(), extra_env=env)
        started.append(server)
        return server.__enter__()

    yield start
    for server in started:
        server.stop()


def token_for(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


@pytest.fixture
def annotator_tokens(project, alice, bob) -> list[str]:
    """The project's three annotators' tokens (its overlap is 3)."""
    third = UserFactory(username="annie")
    MembershipFactory(project=project, user=third, role=Role.ANNOTATOR)
    return [token_for(user) for user in (alice, bob, third)]


@pytest.fixture
def heuristic_judge(transactional_db) -> str:
    call_command("add_judge", JUDGE, kind="heuristic", verbosity=0)
    return JUDGE


def text_pairs(count: int) -> list[dict]:
    """Text pairs whose responses differ in length, so that a script preferring the longer
    one gives a consistent label."""
    return [
        {
            "id": f"p-{i}",
            "task": "text",
            "prompt_content": f"Describe shape number {i}.",
            "response_a": {"model_name": "m-one", "response_content": "A circle." + " x" * i},
            "response_b": {"model_name": "m-two", "response_content": "A red square, large."},
        }
        for i in range(count)
    ]


def write_pairs(path: Path, pairs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(pair) + "\n" for pair in pairs))
    return path
