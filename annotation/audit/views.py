"""The Audit log tab (docs/audit.md): a project's changes, filtered by actor, action and days,
a page at a time, and the filtered rows as a CSV download; the site-wide log for operators."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from annotation.audit.access import check_site_auditor, get_audited_project
from annotation.audit.forms import AuditFilterForm
from annotation.audit.selectors import (
    CSV_HEADER,
    audit_actors,
    audit_csv_rows,
    audit_events,
)
from annotation.core.spreadsheets import csv_stream_response
from annotation.models import Project

PAGE = "annotation/audit.html"
# Events on one page of the audit log.
EVENTS_PER_PAGE = 50


def _page(request, project: Project | None, role: str) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    valid = form.is_valid()
    page = None
    if valid:
        events = audit_events(project=project, filters=form.audit_filter())
        page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "project": project,
        "role": role,
        "form": form,
        "page": page,
        "actors": audit_actors(project=project),
        "query": query.urlencode(),
    }
    return render(request, PAGE, context, status=200 if valid else 400)


def _csv(request, project: Project | None, name: str) -> HttpResponse | StreamingHttpResponse:
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return HttpResponse(form.error_text(), status=400, content_type="text/plain")
    events = audit_events(project=project, filters=form.audit_filter())
    return csv_stream_response(f"{name}-audit.csv", CSV_HEADER, audit_csv_rows(events))


@require_GET
@never_cache
@login_required
def audit_log(request, slug: str):
    project, role = get_audited_project(request.user, slug)
    return _page(request, project, role)


@require_GET
@never_cache
@login_required
def audit_csv(request, slug: str):
    project, _ = get_audited_project(request.user, slug)
    return _csv(request, project, project.slug)


@require_GET
@never_cache
@login_required
def site_audit_log(request):
    check_site_auditor(request.user)
    return _page(request, None, "")


@require_GET
@never_cache
@login_required
def site_audit_csv(request):
    check_site_auditor(request.user)
    return _csv(request, None, "site")
