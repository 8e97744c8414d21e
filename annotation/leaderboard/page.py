"""What the Model leaderboard tab shows (docs/leaderboard.md): the table and charts of one
source and task, picked by the ``source`` and ``task`` query parameters, as in the API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotation.leaderboard.charts import strength_chart, win_rate_chart
from annotation.leaderboard.selectors import ModelSource, model_leaderboard, model_tasks
from annotation.models import Project

SOURCE_PARAMETER = "source"
TASK_PARAMETER = "task"


def model_board_context(project: Project, query: Mapping[str, str]) -> dict[str, Any]:
    """The board for the page; an unknown source or task falls back to the default."""
    source = query.get(SOURCE_PARAMETER, "")
    if source not in ModelSource.values:
        source = ModelSource.CONSENSUS
    tasks = model_tasks(project)
    task = query.get(TASK_PARAMETER, "")
    if task not in tasks:
        task = ""
    board = model_leaderboard(project=project, source=source, task=task)
    return {
        "model_board": board,
        "model_sources": ModelSource.choices,
        "model_tasks": tasks,
        "model_charts": [strength_chart(board), win_rate_chart(board)] if board.models else [],
    }
