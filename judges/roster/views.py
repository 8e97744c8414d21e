"""Judges in the app: operators (staff and superusers) add and edit them on the judges page
with the checks ``add_judge`` makes; a project's curators and researchers see, read-only,
the judges their project may run (docs/judges.md, "The judges page")."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from annotation.core.access import STAFF_ROLES, get_project_for_user, is_operator
from judges.core.forms import add_service_errors
from judges.models import Judge
from judges.roster.forms import JudgeForm
from judges.roster.selectors import judges_for_project
from judges.roster.services import judge_create, judge_update


def _check_operator(user) -> None:
    if not is_operator(user):
        raise PermissionDenied("Only operators manage judges.")


def _save(form: JudgeForm, save) -> Judge | None:
    """The judge ``save(**values)`` made, or None with the service's errors on the form."""
    if not form.is_valid():
        form.forget_api_key_env()
        return None
    try:
        return save(**form.service_kwargs())
    except ValidationError as exc:
        add_service_errors(form, exc)
        form.forget_api_key_env()
        return None


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def judge_list(request):
    """Every judge, and the form that adds one."""
    _check_operator(request.user)
    form = JudgeForm(request.POST or None)
    if form.is_bound:
        judge = _save(form, judge_create)
        if judge is not None:
            messages.success(request, f"Added the {judge.kind} judge {judge.name}.")
            return redirect("judges:judge-list")
    judges = Judge.objects.prefetch_related("projects").order_by("name")
    context = {"judges": judges, "form": form}
    return render(request, "judges/judge_list.html", context, status=400 if form.is_bound else 200)


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def judge_edit(request, judge_id: int):
    _check_operator(request.user)
    judge = get_object_or_404(Judge, pk=judge_id)
    form = JudgeForm(request.POST or None, judge=judge)
    if form.is_bound:
        saved = _save(
            form, lambda **values: judge_update(judge=judge, actor=request.user, **values)
        )
        if saved is not None:
            state = "enabled" if saved.enabled else "disabled"
            messages.success(request, f"Saved the judge {saved.name} ({state}).")
            return redirect("judges:judge-list")
    context = {"judge": judge, "form": form}
    return render(request, "judges/judge_edit.html", context, status=400 if form.is_bound else 200)


@require_GET
@login_required
def project_judges(request, slug: str):
    """The judges this project may run, read-only; operators get a link to edit each."""
    project, role = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
    judges = judges_for_project(project).prefetch_related("projects").order_by("name")
    context = {
        "project": project,
        "role": role,
        "judges": judges,
        "operator": is_operator(request.user),
    }
    return render(request, "judges/project_judges.html", context)
