"""Request limits, decided before any view runs: the address (no NUL in its path or query,
docs/api.md, "Errors"), then the body, from the headers before anything reads it
(docs/operations.md, "Request body limits").

Every request may declare at most ``ARBITER_MAX_REQUEST_BYTES``. Views marked with
``@allows_large_upload`` (the import page and the import API) take up to
``ARBITER_MAX_UPLOAD_BYTES`` from a curator of the project in their URL, or a superuser. A body
without a Content-Length is refused with 411: Django reads such a body as empty (WSGIRequest
and the development server limit ``wsgi.input`` to the declared length, 0 when there is none),
so refusing it says so instead of acting on a request that lost its body.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.json_input import text_refusal

LARGE_UPLOAD_MARK = "allows_large_upload"
API_PATH_PREFIX = "/api/"


def allows_large_upload(view):
    """Marks a view (function or class) whose project's curators may send large bodies."""
    setattr(view, LARGE_UPLOAD_MARK, True)
    return view


def _large_upload_slug(path_info: str) -> str | None:
    """The project slug when the view at this path is marked ``@allows_large_upload``."""
    try:
        match = resolve(path_info)
    except Resolver404:
        return None
    view = getattr(match.func, "view_class", match.func)  # a class-based view's class
    return match.kwargs.get("slug") if getattr(view, LARGE_UPLOAD_MARK, False) else None


def _sender(request):
    """Who sends the body: the token's user for ``Authorization: Token``, else the session's.
    Both read headers only; the view then authenticates in its own way."""
    try:
        authenticated = TokenAuthentication().authenticate(request)
    except AuthenticationFailed:
        return None
    return authenticated[0] if authenticated else request.user


def _is_curator(user, slug: str) -> bool:
    if user is None:
        return False
    try:
        get_project_for_user(user, slug, roles=CURATORS)
    except (Http404, PermissionDenied):
        return False
    return True


def _body_limit(request) -> int:
    """The most bytes this request may declare."""
    slug = _large_upload_slug(request.path_info)
    if slug is not None and _is_curator(_sender(request), slug):
        return settings.ARBITER_MAX_UPLOAD_BYTES
    return settings.ARBITER_MAX_REQUEST_BYTES


def _refusal(request, status: int, message: str) -> HttpResponse:
    if request.path_info.startswith(API_PATH_PREFIX):
        return JsonResponse({"detail": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def body_refusal(request) -> HttpResponse | None:
    """The answer to a request whose headers already rule its body out, or None."""
    declared = request.META.get("CONTENT_LENGTH", "")
    if not declared:
        if request.META.get("HTTP_TRANSFER_ENCODING"):
            return _refusal(request, 411, "Content-Length is required: send the body with one.")
        return None
    if not declared.isdigit():
        return _refusal(request, 400, f"Content-Length {declared!r} is not a number.")
    length = int(declared)
    if length <= settings.ARBITER_MAX_REQUEST_BYTES:
        return None
    limit = _body_limit(request)
    if length <= limit:
        return None
    return _refusal(
        request,
        413,
        f"Content-Length {length:,} is larger than the {limit:,} bytes allowed for this request.",
    )


class RequestBodyLimitMiddleware:
    """Answers 413 (too large), 411 (no length) or 400 (a length that is not a number) before
    the body is read; other requests go on unchanged."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = body_refusal(request)
        return refusal if refusal is not None else self.get_response(request)


def address_refusal(request) -> HttpResponse | None:
    """400 for a path or query string holding text no page can act on (a NUL, which no
    database text holds): every view would fail on it in its own way, most with a 500."""
    values = [request.path_info]
    for key, items in request.GET.lists():
        values += [key, *items]
    for value in values:
        if (problem := text_refusal(value)) is not None:
            return _refusal(request, 400, f"The request's address is refused: its {problem}.")
    return None


class RequestAddressMiddleware:
    """Answers 400 for an address ``address_refusal`` refuses; other requests go on."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = address_refusal(request)
        return refusal if refusal is not None else self.get_response(request)
