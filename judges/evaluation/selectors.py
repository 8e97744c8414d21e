"""Reads for judge evaluations: one as the command line and the API give it, and the
leaderboard of a project's finished evaluations on one target."""

from __future__ import annotations

from annotation.models import Project
from judges.models import JudgeEvaluation


def evaluation_summary(evaluation: JudgeEvaluation) -> dict:
    """An evaluation as the command line and the API give it: what was scored, and the
    results (docs/judges-evaluation.md, "The results")."""
    return {
        "id": evaluation.pk,
        "judge": evaluation.judge.name,
        "kind": evaluation.judge.kind,
        "target": evaluation.target_name,
        "project": evaluation.project.slug,
        "release": evaluation.release or None,
        "status": evaluation.status,
        "calls": evaluation.calls,
        "seed": evaluation.seed,
        "error": evaluation.error,
        "started_at": evaluation.started_at.isoformat() if evaluation.started_at else None,
        "finished_at": evaluation.finished_at.isoformat() if evaluation.finished_at else None,
        "pairs": len(evaluation.target),
        "results": evaluation.results or None,
    }


def leaderboard(project: Project, *, release: str = "") -> list[JudgeEvaluation]:
    """The project's finished evaluations on one target, best dual accuracy first."""
    evaluations = JudgeEvaluation.objects.filter(
        project=project, release=release, status=JudgeEvaluation.Status.SUCCEEDED
    ).select_related("judge", "project")

    def rank(evaluation: JudgeEvaluation) -> tuple:
        value = evaluation.results.get("overall", {}).get("dual_accuracy", {}).get("value")
        return (value is None, -(value or 0), evaluation.judge.name)

    return sorted(evaluations, key=rank)
