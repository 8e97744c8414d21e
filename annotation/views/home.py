from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from annotation.access import get_project_for_user
from annotation.models import Membership, Role
from annotation.selectors import (
    annotator_progress,
    disputes_waiting,
    overview_next_steps,
    project_overview,
    projects_for_user,
)
from config.celery import app as celery_app


@login_required
def home(request):
    return render(request, "annotation/home.html", {"rows": projects_for_user(request.user)})


@login_required
def project_detail(request, slug: str):
    """The Overview: an annotator's own progress, or the project's for curators and
    researchers, with what to do next."""
    project, role = get_project_for_user(request.user, slug)
    context: dict = {"project": project, "role": role}
    if role == Role.ANNOTATOR:
        context["progress"] = annotator_progress(project=project, annotator=request.user)
        context["annotator_paused"] = Membership.objects.filter(
            project=project, user=request.user, paused=True
        ).exists()
    else:
        overview = project_overview(project=project)
        context["overview"] = overview
        waiting = overview["disputes_waiting"]
        rows = disputes_waiting(project=project) if waiting else []
        context["steps"] = overview_next_steps(
            project=project,
            role=role,
            by_status=overview["by_status"],
            disputes_waiting=waiting,
            waiting_for=[name for row in rows for name in row["annotators"]],
        )
    return render(request, "annotation/project_detail.html", context)


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _check_broker() -> str:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return "ok"


@require_GET
@never_cache
def healthz(request):
    """Liveness for load balancers: the database and the Celery broker, each ok or its error."""
    checks = {}
    for name, check in (("database", _check_database), ("broker", _check_broker)):
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
            checks[name] = f"error: {type(exc).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if healthy else "error", **checks}
    return JsonResponse(body, status=200 if healthy else 503)


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico whatever the page links; the icon is an SVG."""
    return redirect(static("favicon.svg"), permanent=True)
