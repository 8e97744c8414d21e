"""Judge backends by kind. Imported lazily, so an HTTP worker never loads torch."""

from __future__ import annotations

from django.utils.module_loading import import_string

from judges.backends.base import JudgeBackend, JudgeItem, JudgeResult

BACKENDS = {
    "openai": "judges.backends.openai.OpenAIBackend",
    "reward_model": "judges.backends.reward_model.RewardModelBackend",
    "heuristic": "judges.backends.heuristic.HeuristicBackend",
    "scores": "judges.backends.scores.ScoresBackend",
}

__all__ = ["BACKENDS", "JudgeBackend", "JudgeItem", "JudgeResult", "get_backend"]


def get_backend(judge) -> JudgeBackend:
    """The backend for ``judge``; the caller closes it (``close()``) when done."""
    try:
        path = BACKENDS[judge.kind]
    except KeyError:
        raise ValueError(f"Judge {judge.name!r} has unknown kind {judge.kind!r}") from None
    return import_string(path)(judge)
