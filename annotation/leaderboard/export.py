"""The model leaderboard as a CSV download: a row per model, best first."""

from __future__ import annotations

from django.http import HttpResponse

from annotation.core.spreadsheets import csv_response
from annotation.leaderboard.selectors import ModelLeaderboard

HEADER = ("rank", "model", "score", "low", "high", "wins", "losses", "ties", "pairs")


def model_leaderboard_csv(board: ModelLeaderboard, *, slug: str) -> HttpResponse:
    task = f"-{board.task}" if board.task else ""
    rows = (
        (
            place,
            row["model"],
            row["score"],
            row["low"],
            row["high"],
            row["wins"],
            row["losses"],
            row["ties"],
            row["pairs"],
        )
        for place, row in enumerate(board.as_json()["models"], start=1)
    )
    return csv_response(f"{slug}-models-{board.source}{task}.csv", HEADER, rows)
