"""A scripted judge backend for filter-run tests, and judges that use it.

``use_scripted_judges(monkeypatch, {"name": answer})`` makes ``get_backend`` return a backend
that answers each item with ``answer(item) -> JudgeResult`` and records what it was shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import pytest

from config.celery import app
from judges import backends
from judges.backends.base import JudgeBackend, JudgeItem, JudgeResult
from judges.models import Judge
from judges.runs.calls import judge_backends_close
from tests.factories import JudgeFactory

Answer = Callable[[JudgeItem], JudgeResult]


class ScriptedBackend(JudgeBackend):
    calls: ClassVar[list[tuple[str, JudgeItem]]] = []

    def __init__(self, judge, answers: dict[str, Answer]) -> None:
        super().__init__(judge)
        self.answers = answers  # looked up per call, so a test may change a judge's mind

    def judge_batch(self, items: list[JudgeItem]) -> list[JudgeResult]:
        results = []
        for item in items:
            ScriptedBackend.calls.append((self.judge.name, item))
            results.append(self.answers[self.judge.name](item))
        return results


def use_scripted_judges(monkeypatch, answers: dict[str, Answer]) -> list[tuple[str, JudgeItem]]:
    """Routes every judge named in ``answers`` to a ScriptedBackend; returns the call log."""
    judge_backends_close()  # drop backends a previous test left in this process
    ScriptedBackend.calls = []
    monkeypatch.setattr(backends, "get_backend", lambda judge: ScriptedBackend(judge, answers))
    return ScriptedBackend.calls


@pytest.fixture
def celery_eager():
    """Runs tasks inline even when the settings were loaded outside ARBITER_ENV=test."""
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = eager
    judge_backends_close()


def make_judges(*names: str, kind: str = "openai") -> list[Judge]:
    return [
        JudgeFactory(name=name, kind=kind, base_url="http://127.0.0.1:9/v1", model="m")
        for name in names
    ]


def ok(preferred: str) -> JudgeResult:
    return JudgeResult(outcome="ok", preferred=preferred, latency_ms=100, prompt_tokens=10)


def canonical(side: str) -> Answer:
    """Always votes for canonical ``side`` (A, B or tie), whichever order it is shown in."""
    return lambda item: ok(item.shown_preference(side))


def truth() -> Answer:
    """Votes for the side named in the pair's ``metadata["truth"]``."""
    return lambda item: ok(item.shown_preference(item.metadata["truth"]))


def first_shown() -> Answer:
    """Position bias at its worst: always prefers the response shown first."""
    return lambda item: ok("first")


def outcome(name: str, **fields) -> Answer:
    return lambda item: JudgeResult(outcome=name, **fields)
