"""Access to filter runs, judge evaluations and training runs goes through the project's
access check (annotation.core.access)."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import Http404

from annotation.core.access import STAFF_ROLES, get_project_for_user
from judges.models import FilterRun, JudgeEvaluation, TrainingRun


def get_run_for_user(
    user, slug: str, number: int, roles: Iterable[str] = STAFF_ROLES
) -> tuple[FilterRun, str]:
    """The run numbered ``number`` in the user's project (``FilterRun.number``, the number
    its pages, URLs and the API go by) and their role: 404 for outsiders and for numbers the
    project has not reached, 403 for members without one of ``roles``."""
    project, role = get_project_for_user(user, slug, roles=roles)
    run = FilterRun.objects.filter(project=project, number=number).select_related("project").first()
    if run is None:
        raise Http404("No such filter run")
    return run, role


def get_run_by_id_for_user(
    user, slug: str, run_id: int, roles: Iterable[str] = STAFF_ROLES
) -> tuple[FilterRun, str]:
    """``get_run_for_user`` by the run's database id, which URLs carried before runs went by
    their number: only to send those URLs on to the run's own."""
    project, role = get_project_for_user(user, slug, roles=roles)
    run = FilterRun.objects.filter(project=project, pk=run_id).select_related("project").first()
    if run is None:
        raise Http404("No such filter run")
    return run, role


def get_evaluation_for_user(
    user, slug: str, evaluation_id: int, roles: Iterable[str] = STAFF_ROLES
) -> tuple[JudgeEvaluation, str]:
    """The judge evaluation in the user's project and their role: 404 for outsiders and for
    evaluations of other projects, 403 for members without one of ``roles``."""
    project, role = get_project_for_user(user, slug, roles=roles)
    evaluation = (
        JudgeEvaluation.objects.filter(project=project, pk=evaluation_id)
        .select_related("judge", "project")
        .first()
    )
    if evaluation is None:
        raise Http404("No such evaluation")
    return evaluation, role


def get_training_run_for_user(user, slug: str, run_id: int) -> tuple[TrainingRun, str]:
    """The training run in the user's project and their role: 404 for outsiders and for
    runs of other projects, 403 for annotators (trainings are researchers' and curators')."""
    project, role = get_project_for_user(user, slug, roles=STAFF_ROLES)
    run = (
        TrainingRun.objects.filter(project=project, pk=run_id)
        .select_related("judge", "release")
        .first()
    )
    if run is None:
        raise Http404("No such training run")
    run.project = project
    return run, role
