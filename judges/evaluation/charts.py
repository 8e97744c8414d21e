"""The leaderboard page's charts (docs/judges-evaluation.md, "The leaderboard"), drawn with
annotation's SVG charts: dual accuracy per judge and position bias per judge, each with its
95% interval, and per judge the dual accuracy per task."""

from __future__ import annotations

from annotation.charts.bars import bars
from annotation.charts.markup import Bar, Chart, Reference
from judges.models import JudgeEvaluation

CHANCE = Reference(0.5, "chance")
NO_BIAS = Reference(0.5, "no bias")


def _bar(label: str, metric: dict | None) -> Bar:
    metric = metric or {}
    return Bar(label, metric.get("value"), metric.get("low"), metric.get("high"))


def _per_judge(
    evaluations: list[JudgeEvaluation], metric: str, *, title: str, value_header: str, **kwargs
) -> Chart:
    return bars(
        [_bar(e.judge.name, e.results["overall"][metric]) for e in evaluations],
        title=title,
        label_header="judge",
        value_header=value_header,
        domain=(0.0, 1.0),
        **kwargs,
    )


def accuracy_chart(evaluations: list[JudgeEvaluation]) -> Chart:
    return _per_judge(
        evaluations,
        "dual_accuracy",
        title="Dual accuracy per judge",
        value_header="dual accuracy",
        references=[CHANCE],
        chart_id="chart-accuracy",
    )


def position_chart(evaluations: list[JudgeEvaluation]) -> Chart:
    return _per_judge(
        evaluations,
        "first_shown_share",
        title="Position bias: share of votes for the response shown first",
        value_header="first shown chosen",
        references=[NO_BIAS],
        chart_id="chart-position",
    )


def task_chart(evaluation: JudgeEvaluation) -> Chart:
    return bars(
        [
            _bar(task, metrics["dual_accuracy"])
            for task, metrics in evaluation.results["by_task"].items()
        ],
        title=f"Dual accuracy per task: {evaluation.judge.name}",
        label_header="task",
        value_header="dual accuracy",
        domain=(0.0, 1.0),
        references=[CHANCE],
        chart_id=f"chart-tasks-{evaluation.pk}",
    )
