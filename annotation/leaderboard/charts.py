"""The model leaderboard's charts (docs/leaderboard.md): each model's strength with its 95%
interval, and the win rate of every model against every other as a heatmap."""

from __future__ import annotations

import math

from annotation.charts.bars import bars
from annotation.charts.heatmap import heatmap
from annotation.charts.markup import Bar, Chart, Reference
from annotation.leaderboard.bradley_terry import ELO_MEAN
from annotation.leaderboard.selectors import ModelLeaderboard

_MEAN = Reference(ELO_MEAN, "mean")
_STEP = 100.0  # the strength axis ends on whole hundreds


def strength_chart(board: ModelLeaderboard) -> Chart:
    values = [
        v for row in board.models for v in (row.score, row.low, row.high) if v is not None
    ] or [ELO_MEAN]
    domain = (
        math.floor(min(*values, ELO_MEAN) / _STEP) * _STEP,
        math.ceil(max(*values, ELO_MEAN) / _STEP) * _STEP,
    )
    return bars(
        [Bar(row.model, row.score, row.low, row.high) for row in board.models],
        title="Model strength (Bradley-Terry, Elo scale)",
        label_header="model",
        value_header="score",
        domain=domain,
        references=[_MEAN],
        chart_id="chart-model-strength",
    )


def win_rate_chart(board: ModelLeaderboard) -> Chart:
    """Rows and columns in leaderboard order, best first."""
    index = {model: i for i, model in enumerate(board.outcomes.models)}
    order = [index[row.model] for row in board.models]
    rates = board.outcomes.win_rates()
    return heatmap(
        [row.model for row in board.models],
        [[rates[i][j] for j in order] for i in order],
        title="Win rate of the row's model against the column's (ties count half)",
        value_header="win rate",
        missing_note="never compared",
        chart_id="chart-model-win-rates",
        value_range=(0.0, 1.0),
        subject="model",
    )
