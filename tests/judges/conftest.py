"""Judge tests keep reward-model checkpoints in a folder of their own, set as the root."""

from __future__ import annotations

import pytest

from tests.factories import JudgeFactory
from tests.judges.fake_openai import FakeOpenAI, by_marker


@pytest.fixture(autouse=True)
def checkpoint_root(settings, tmp_path):
    """ARBITER_CHECKPOINT_ROOT for this test: an empty folder under its tmp_path."""
    root = tmp_path / "checkpoints"
    root.mkdir()
    settings.ARBITER_CHECKPOINT_ROOT = root
    return root


@pytest.fixture
def marker_server():
    """The loopback OpenAI-compatible server, preferring the response that says GOOD."""
    with FakeOpenAI(by_marker("GOOD")) as fake:
        yield fake


@pytest.fixture
def marker_judge(db, marker_server):
    """An openai judge on ``marker_server``."""
    return JudgeFactory(
        name="fake-judge",
        kind="openai",
        base_url=marker_server.base_url,
        model="judge-model",
        timeout_s=5.0,
        options={"retry_base_s": 0.01, "retry_max_s": 0.2},
    )
