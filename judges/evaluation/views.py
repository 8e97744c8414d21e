"""The judge leaderboard page: curators and researchers score judges and read the results."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.models import Pair, Release
from judges.core.views import submit
from judges.evaluation.charts import accuracy_chart, position_chart, task_chart
from judges.evaluation.forms import EvaluationForm
from judges.evaluation.selectors import leaderboard
from judges.evaluation.services import judge_evaluation_create
from judges.models import JudgeEvaluation


@login_required
@require_http_methods(["GET", "POST"])
def leaderboard_page(request, slug: str):
    """The judges' scores on one target (``?release=X.Y.Z``, or the current consensus), with
    a form that starts an evaluation; docs/judges-evaluation.md, "The leaderboard"."""
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    releases = list(
        Release.objects.filter(project=project, status=Release.Status.PUBLISHED)
        .order_by("-published_at")
        .values_list("version", flat=True)
    )
    has_reference = (
        Pair.objects.filter(project=project, is_gold=False).exclude(prior_label="").exists()
    )
    release = request.GET.get("release", "")
    reference = has_reference and release == JudgeEvaluation.REFERENCE
    if release and release not in releases and not reference:
        release = ""
    form = EvaluationForm(
        request.POST or None,
        project=project,
        releases=releases,
        reference=has_reference,
        initial={"release": release},
    )
    status = 200
    if form.is_bound and form.is_valid():
        target = form.cleaned_data["release"]
        evaluation, status = submit(
            request,
            form,
            lambda: judge_evaluation_create(
                judge=form.cleaned_data["judge"],
                project=project,
                release=target,
                seed=form.cleaned_data["seed"],
                created_by=request.user,
            ),
        )
        if evaluation is not None:
            messages.success(
                request, f"Evaluating {evaluation.judge.name} on {evaluation.target_name}."
            )
            query = f"?release={target}" if target else ""
            return redirect(reverse("judges:leaderboard", args=[project.slug]) + query)
    board = leaderboard(project, release=release)
    unfinished = JudgeEvaluation.objects.filter(project=project, release=release).exclude(
        status=JudgeEvaluation.Status.SUCCEEDED
    )
    context = {
        "project": project,
        "role": role,
        "form": form,
        "release": release,
        "releases": releases,
        "has_reference": has_reference,
        "reference": reference,
        "target": (
            f"{project.slug}:{JudgeEvaluation.REFERENCE}"
            if reference
            else f"{project.slug}@{release}"
            if release
            else project.slug
        ),
        "board": board,
        "unfinished": unfinished.select_related("judge"),
        "charts": [
            (
                "Dual accuracy",
                "Both orders of every A/B pair scored where the judge answered, as MMRB2 scores;"
                " 0.5 is chance.",
                accuracy_chart(board),
            ),
            (
                "Position bias",
                "Share of A/B votes for the response shown first; 0.5 is none.",
                position_chart(board),
            ),
        ]
        if board
        else [],
        "task_charts": [(evaluation, task_chart(evaluation)) for evaluation in board],
    }
    return render(request, "judges/leaderboard.html", context, status=status)
