"""The model leaderboard in a release's statistics and dataset card (docs/releases.md,
"Dataset card"): the released pairs' labels ranked as on the Model leaderboard tab, with the fixed
bootstrap seed, so a rebuild gives the same bytes."""

from __future__ import annotations

from collections import Counter
from typing import Any

from annotation.leaderboard.bradley_terry import (
    BOOTSTRAP_ROUNDS,
    BOOTSTRAP_SEED,
    Outcomes,
    rank_models,
)


def release_models(comparisons: Counter[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Each model's score, 95% interval and counts, best first, from ``(model of A, model
    of B, label)`` counts of the released pairs."""
    ranked = rank_models(
        Outcomes.from_counts(dict(comparisons)), rounds=BOOTSTRAP_ROUNDS, seed=BOOTSTRAP_SEED
    )
    return [
        {
            "model": row.model,
            "score": round(row.score, 1),
            "low": None if row.low is None else round(row.low, 1),
            "high": None if row.high is None else round(row.high, 1),
            "wins": row.wins,
            "losses": row.losses,
            "ties": row.ties,
            "pairs": row.pairs,
        }
        for row in ranked
    ]


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _escaped(text: str) -> str:
    """A table cell's text: a pipe would end the cell, a line break the row."""
    return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())


def models_section(models: list[dict[str, Any]]) -> list[str]:
    """The card's lines: a table of the models, or nothing when no two named models meet."""
    if not models:
        return []
    return [
        "## Models",
        "",
        "The response models ranked by Bradley-Terry strength on the released labels (a tie "
        "is half a win each), on the Elo scale (400 points are ten to one odds, the mean is "
        f"1000), with 95% bootstrap intervals over {BOOTSTRAP_ROUNDS} resamples (seed "
        f"{BOOTSTRAP_SEED}); pairs of a model with itself are left out.",
        "",
        "| # | Model | Score | 95% interval | Wins | Losses | Ties | Pairs |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {place} | {_escaped(row['model'])} | {_cell(row['score'])} | "
            f"{_cell(row['low'])} to {_cell(row['high'])} | {row['wins']} | {row['losses']} | "
            f"{row['ties']} | {row['pairs']} |"
            for place, row in enumerate(models, start=1)
        ),
        "",
    ]
