"""The one place that turns domain errors into HTTP answers (docs/api.md, "Errors").

Services raise ``annotation.core.errors`` kinds or Django's ``ValidationError``; the REST API maps
them here through DRF's ``EXCEPTION_HANDLER`` and pages through ``status_for``, so every
endpoint answers a refusal with the same status and a ``{"detail": ...}`` body.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from django.views import defaults
from rest_framework.response import Response
from rest_framework.views import exception_handler

from annotation.core import errors
from annotation.core.access import get_project_for_user
from annotation.models import Project

_STATUS = (
    (errors.InvalidInput, 400),
    (errors.NotAllowed, 403),
    (errors.NotFound, 404),
    (errors.Unavailable, 503),
    (errors.Conflict, 409),
    (errors.DomainError, 409),
    (ValidationError, 400),
)


DOMAIN_ERRORS = tuple(kind for kind, _ in _STATUS)


def status_for(exc: BaseException) -> int:
    """The HTTP status for a domain error (500 for anything else: a bug)."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def error_body(exc: Exception) -> dict:
    """``{"detail": message}``; a ValidationError with fields also carries each field's
    messages under its name, as DRF's own validation errors do."""
    if isinstance(exc, ValidationError):
        if hasattr(exc, "error_dict"):
            fields = exc.message_dict
            detail = " ".join(
                f"{field}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
                for field, messages in fields.items()
            )
            return {**fields, "detail": detail}
        return {"detail": " ".join(exc.messages)}
    return {"detail": str(exc)}


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler, plus domain errors and Django ValidationErrors from services."""
    if isinstance(exc, DOMAIN_ERRORS):
        status = status_for(exc)
        response = Response(error_body(exc), status=status)
        if status == 503:
            response["Retry-After"] = "30"
        return response
    return exception_handler(exc, context)


def api_not_found(request, unmatched: str = "") -> JsonResponse:
    """Any path under /api/ that names no endpoint: JSON, never the HTML 404 page."""
    detail = f"No API endpoint at {request.path}."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not api_not_found:
            detail += f" Did you mean {request.path}/ (with a trailing slash)?"
    return JsonResponse({"detail": detail}, status=404)


def server_error(request) -> object:
    """A 500 answers JSON under /api/ (clients parse it) and the plain error page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Internal server error; it has been logged."}, status=500)
    return defaults.server_error(request)


# The titles of the error pages the site renders itself (403 and 404).
_ERROR_TITLES = {403: "You cannot open this page", 404: "Page not found"}


def _project_of(request: HttpRequest) -> tuple[Project | None, str | None]:
    """The project the refused URL is in and the user's role there, when they are a member:
    the error page then carries that project's tabs, the way back to what they may use."""
    match = getattr(request, "resolver_match", None)
    slug = match.kwargs.get("slug") if match else None
    user = getattr(request, "user", None)
    if not isinstance(slug, str) or user is None or not user.is_authenticated:
        return None, None
    try:
        return get_project_for_user(user, slug)
    except (Http404, PermissionDenied):
        return None, None


def _error_page(request: HttpRequest, exception: Exception | None, status: int) -> HttpResponse:
    """A 403 or 404: JSON under /api/, elsewhere a page in the site's layout saying why (the
    message a view gave, never a resolver's internals) with links back."""
    message = exception.args[0] if exception is not None and exception.args else ""
    if not isinstance(message, str) or isinstance(exception, Resolver404):
        message = ""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message or _ERROR_TITLES[status] + "."}, status=status)
    project, role = _project_of(request)
    context = {
        "status": status,
        "title": _ERROR_TITLES[status],
        "message": message,
        "project": project,
        "role": role,
    }
    return render(request, "error.html", context, status=status)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: a view's PermissionDenied (a member whose role does not reach the page)."""
    return _error_page(request, exception, 403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: no such page, or one the user may not know exists."""
    return _error_page(request, exception, 404)
