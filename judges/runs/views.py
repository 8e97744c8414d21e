"""Filter run pages: curators and researchers watch runs; only curators start or cancel one."""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.forms import ModelMultipleChoiceField
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.core.access import CURATORS, STAFF_ROLES, get_project_for_user
from annotation.core.jobs import BrokerUnavailable
from annotation.models import PairStatus, Role
from annotation.pairs.views import PairSelectionForm, form_error_text
from config.errors import status_for
from judges.core.access import get_run_by_id_for_user, get_run_for_user
from judges.core.views import submit
from judges.ensemble import easy_rule, easy_votes
from judges.runs.forms import FilterRunForm
from judges.runs.selectors import filter_run_report
from judges.runs.services import filter_run_cancel, filter_run_create, filter_run_resume


@login_required
@require_http_methods(["GET", "POST"])
def run_list(request, slug: str):
    roles = CURATORS if request.method == "POST" else STAFF_ROLES
    project, role = get_project_for_user(request.user, slug, roles=roles)
    form = FilterRunForm(request.POST or None, project=project)
    return _start_run(request, project, role, form)


@login_required
@require_POST
def run_for_pairs(request, slug: str):
    """The start form for the pairs chosen in the pairs browser (checked, or all matching its
    filter); submitted with ``start``, it starts a run on those of them still imported."""
    project, role = get_project_for_user(request.user, slug, roles=CURATORS)
    selection = PairSelectionForm(request.POST, project=project)
    if not selection.is_valid():
        messages.error(request, form_error_text(selection))
        return redirect(f"{reverse('pairs', args=[project.slug])}?{selection.query()}")
    form = FilterRunForm(request.POST if "start" in request.POST else None, project=project)
    return _start_run(request, project, role, form, selection=selection)


def _start_run(request, project, role: str, form: FilterRunForm, selection=None):
    """The runs page with its start form; a bound, valid form starts the run (on the
    selection's pairs when there is one)."""
    pks = selection.cleaned_data["pks"] if selection else None
    status = 200
    if form.is_bound and form.is_valid():
        run, status = submit(
            request,
            form,
            lambda: filter_run_create(
                project=project,
                judges=form.cleaned_data["judges"],
                threshold=form.cleaned_data["threshold"],
                budget_per_task=form.cleaned_data["budget_per_task"],
                min_valid_votes=form.cleaned_data["min_valid_votes"],
                created_by=request.user,
                pair_ids=pks,
            ),
        )
        if run is not None:
            messages.success(request, f"Run {run.number} started.")
            return redirect("judges:run", slug=project.slug, number=run.number)
    waiting = project.pairs.filter(status=PairStatus.IMPORTED)
    imported = (waiting.filter(pk__in=pks) if pks else waiting).count()
    context = {
        "project": project,
        "role": role,
        "runs": [
            (run, easy_votes(threshold=run.threshold, judges=len(run.judges.all())))
            for run in project.filter_runs.prefetch_related("judges")
        ],
        "imported": imported,
        "form": form if role == Role.CURATOR else None,
        "selection": selection,
        "selected": len(pks) if pks else 0,
        "start_blocked": _start_blocked(form=form, imported=imported),
    }
    return render(request, "judges/run_list.html", context, status=status)


def _start_blocked(*, form: FilterRunForm, imported: int) -> str:
    """Why the Start run button is disabled, or "" when a run can start."""
    if not imported:
        return "Nothing to judge: no pair is imported and waiting. Import pairs first."
    # Declared as a ModelMultipleChoiceField; ``fields`` is typed by the base class.
    judges = cast(ModelMultipleChoiceField, form.fields["judges"]).queryset
    if judges is None or not judges.exists():
        return "No judge is available to this project yet."
    return ""


@login_required
@vary_on_headers("HX-Request")
def run_detail(request, slug: str, number: int):
    run, role = get_run_for_user(request.user, slug, number)
    return _render_run(request, run, role)


def _render_run(request, run, role: str, status: int = 200):
    context = {
        "project": run.project,
        "role": role,
        "run": run,
        "report": filter_run_report(run),
        "easy_rule": easy_rule(
            threshold=run.threshold, judges=run.judges.count(), min_votes=run.min_valid_votes
        ),
    }
    template = "judges/run_detail.html"
    if request.htmx:
        template += "#run_progress"
    return render(request, template, context, status=status)


@login_required
@require_POST
def run_cancel(request, slug: str, number: int):
    run, _ = get_run_for_user(request.user, slug, number, roles=CURATORS)
    if filter_run_cancel(run=run, actor=request.user):
        messages.success(request, f"Run {run.number} cancelled; its pairs are imported again.")
    else:
        messages.error(request, f"Run {run.number} had already {run.status}.")
    return redirect("judges:run", slug=slug, number=run.number)


@login_required
@require_POST
def run_resume(request, slug: str, number: int):
    run, role = get_run_for_user(request.user, slug, number, roles=CURATORS)
    try:
        enqueued = filter_run_resume(run=run)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    except BrokerUnavailable as exc:
        messages.error(request, str(exc))
        return _render_run(request, run, role, status=status_for(exc))
    else:
        messages.success(request, f"Run {run.number} resumed: {enqueued} calls enqueued.")
    return redirect("judges:run", slug=slug, number=run.number)


# The pages a run's URL named by database id, before runs went by their number.
_MOVED_ACTIONS = {"": "judges:run", "cancel": "judges:run-cancel", "resume": "judges:run-resume"}


def _moved(url: str) -> HttpResponseRedirect:
    """A permanent redirect that keeps the request's method (308): a form posted to an old
    URL is posted again to the new one, its CSRF token with it."""
    response = HttpResponseRedirect(url)
    response.status_code = 308
    return response


def runs_moved(request, slug: str):
    """``/runs/`` and ``/runs/for-pairs/``, the runs list's old URLs: the same under
    ``/filter-runs/``, with the query string; the page there checks who may see it."""
    url = request.get_full_path().replace(f"/p/{slug}/runs/", f"/p/{slug}/filter-runs/", 1)
    return _moved(url)


@login_required
def run_moved(request, slug: str, run_id: int, action: str = ""):
    """A run's old URL, by its database id: sent on to the URL of its number, to those who
    may see the run (outsiders 404, annotators 403, as on the run's page)."""
    if action not in _MOVED_ACTIONS:
        raise Http404("No such page")
    run, _ = get_run_by_id_for_user(request.user, slug, run_id)
    url = reverse(_MOVED_ACTIONS[action], args=[slug, run.number])
    if request.META.get("QUERY_STRING"):
        url += "?" + request.META["QUERY_STRING"]
    return _moved(url)
