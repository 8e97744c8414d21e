"""Media bytes, served only to members of a project whose content uses them.

URLs name the project and the original's content hash, nothing else: they reveal no model,
side or order. What goes out is the served copy, written anew without metadata (made at import,
or here on the first request for an image imported before copies were rebuilt), with a fixed
content type, ``nosniff``, and the served copy's hash as ETag.
Any kind of media is served the same way, by its content type and size: single ``Range``
requests answer 206 (a browser seeks in a long video), HEAD opens nothing, and with
``ARBITER_MEDIA_ACCEL`` the web server sends the bytes after the checks here
(annotation/core/downloads.py; docs/operations.md, "Media through the web server").
A browser session or an API token (``Authorization: Token ...``) identifies the member, so
the image URLs in an API client's assignment work for it too."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, HttpResponseBase
from django.views.decorators.http import require_safe
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from annotation.core.access import get_project_for_user
from annotation.core.downloads import handed_off_response, ranged_file_response
from annotation.media.services import MediaError, image_copy_outdated, media_strip_metadata
from annotation.models import Media, ProjectMedia

SHA256 = re.compile(r"[0-9a-f]{64}")


def _token_user(request):
    """The user of a valid ``Authorization: Token`` header, None without one; raises
    ``AuthenticationFailed`` for a header with a wrong token."""
    found = TokenAuthentication().authenticate(request)
    return found[0] if found else None


@require_safe
def media_file(request, slug: str, sha256: str):
    user = request.user
    if not user.is_authenticated:
        try:
            user = _token_user(request)
        except exceptions.AuthenticationFailed as exc:
            return HttpResponse(str(exc.detail), status=401, content_type="text/plain")
        if user is None:
            return redirect_to_login(request.get_full_path())
    project, _ = get_project_for_user(user, slug)
    if not SHA256.fullmatch(sha256):
        # No stored media has another name; a NUL would fail the database's text.
        raise Http404("No such media in this project")
    link = (
        ProjectMedia.objects.filter(project=project, media_id=sha256)
        .select_related("media")
        .first()
    )
    if link is None:
        raise Http404("No such media in this project")
    media: Media = link.media
    if media.served_sha256 is None and media.kind != Media.Kind.IMAGE:
        # A video or audio file waiting for its playable copy (a TranscodeJob).
        raise Http404("This media has no playable copy yet")
    try:
        if image_copy_outdated(media):
            media_strip_metadata(media=media, remake=True)
        etag = f'"{media.served_sha256}"'
        root = Path(settings.MEDIA_ROOT)
        response: HttpResponseBase
        if settings.ARBITER_MEDIA_ACCEL != "off":
            response = handed_off_response(
                request,
                root=root,
                relative_path=media.served_relative_path,
                mode=settings.ARBITER_MEDIA_ACCEL,
                nginx_prefix=settings.ARBITER_MEDIA_ACCEL_PREFIX,
                content_type=media.served_content_type,
                etag_value=media.served_sha256,
            )
        else:
            response = ranged_file_response(
                request,
                root / media.served_relative_path,
                content_type=media.served_content_type,
                etag_value=media.served_sha256,
            )
    except FileNotFoundError:
        raise Http404("Media file is missing from storage") from None
    except MediaError:
        # Never the original instead: it may name the model that made it.
        raise Http404("This image cannot be shown: its served copy cannot be made") from None
    return _with_media_headers(response, etag)


def _with_media_headers(response: HttpResponseBase, etag: str) -> HttpResponseBase:
    response["ETag"] = etag
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    # no-transform: a proxy that compressed it would break byte ranges.
    response["Cache-Control"] = "private, max-age=86400, immutable, no-transform"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
