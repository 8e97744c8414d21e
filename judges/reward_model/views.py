"""Reward-model training pages: researchers and curators start a training from the project's
consensus and follow it (a progress bar polled with htmx, loss and accuracy curves)."""

from __future__ import annotations

import math

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from annotation.charts.line import line_with_band
from annotation.charts.markup import BandPoint, Chart, Reference
from annotation.core.access import STAFF_ROLES, get_project_for_user
from annotation.core.jobs import BrokerUnavailable
from config.errors import status_for
from judges.core.access import get_training_run_for_user
from judges.core.forms import add_service_errors
from judges.models import TrainingRun
from judges.reward_model.forms import TrainingForm
from judges.reward_model.report import CONFIDENCE, heldout_report
from judges.reward_model.services import training_release, training_run_create

CHANCE_ACCURACY = (Reference(0.5, "chance"),)
CHANCE_LOSS = (Reference(math.log(2), "chance"),)


@login_required
@require_http_methods(["GET", "POST"])
def training_list(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    form = TrainingForm(request.POST or None, project=project)
    status = 200
    if form.is_bound:
        if form.is_valid():
            version = form.cleaned_data["source"]
            try:
                run = training_run_create(
                    project=project,
                    options=form.options(),
                    register_name=form.cleaned_data["register"],
                    release=training_release(project, version) if version else None,
                    created_by=request.user,
                )
            except ValidationError as exc:
                add_service_errors(form, exc)
            except BrokerUnavailable as exc:
                messages.error(request, str(exc))
                status = status_for(exc)
            else:
                messages.success(request, f"Training {run.pk} started.")
                return redirect("judges:training-run", slug=project.slug, run_id=run.pk)
        if status == 200:
            status = 400
    runs = project.training_runs.select_related("judge", "created_by", "release")[:50]
    # Each run with what its held-out accuracy rests on (None until it has one).
    rows = [
        (run, heldout_report(accuracy=run.heldout_accuracy, pairs=run.heldout_pairs))
        for run in runs
    ]
    context = {"project": project, "role": role, "form": form, "runs": rows}
    return render(request, "judges/training_list.html", context, status=status)


# (history key, title, y label, reference lines) of each curve
CURVES = (
    ("heldout_accuracy", "Held-out accuracy per epoch", "accuracy", CHANCE_ACCURACY),
    ("train_loss", "Training loss per epoch", "train loss", CHANCE_LOSS),
    ("heldout_loss", "Held-out loss per epoch", "held-out loss", CHANCE_LOSS),
)


def training_charts(run: TrainingRun) -> list[tuple[str, Chart]]:
    """(title, chart) of held-out accuracy and both losses per epoch."""
    return [
        (
            title,
            line_with_band(
                [BandPoint(x=row["epoch"], y=row[key]) for row in run.history],
                title=title,
                x_label="epoch",
                y_label=y_label,
                references=references,
                chart_id=f"training-{run.pk}-{key.replace('_', '-')}",
            ),
        )
        for key, title, y_label, references in CURVES
    ]


@login_required
@vary_on_headers("HX-Request")
def training_detail(request, slug: str, run_id: int):
    run, role = get_training_run_for_user(request.user, slug, run_id)
    context = {
        "project": run.project,
        "role": role,
        "run": run,
        "heldout": heldout_report(accuracy=run.heldout_accuracy, pairs=run.heldout_pairs),
        "confidence": CONFIDENCE,
        "charts": training_charts(run) if run.history else [],
    }
    template = "judges/training_detail.html"
    if request.htmx:
        template += "#training_progress"
    return render(request, template, context)
