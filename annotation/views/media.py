"""Media bytes, served only to members of a project whose content uses them.

URLs name the project and the original's content hash, nothing else: they reveal no model,
side or order. What goes out is the served copy, the original without its metadata (made at
import, or here on the first request for media imported before copies existed), with a fixed
content type, ``nosniff``, and the served copy's hash as ETag.
A browser session or an API token (``Authorization: Token ...``) identifies the member, so
the image URLs in an API client's assignment work for it too."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import FileResponse, Http404, HttpResponse, HttpResponseBase
from django.utils.cache import get_conditional_response
from django.views.decorators.http import require_GET
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from annotation.access import get_project_for_user
from annotation.imports.media import media_strip_metadata
from annotation.models import Media, ProjectMedia


def _token_user(request):
    """The user of a valid ``Authorization: Token`` header, None without one; raises
    ``AuthenticationFailed`` for a header with a wrong token."""
    found = TokenAuthentication().authenticate(request)
    return found[0] if found else None


@require_GET
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
    link = (
        ProjectMedia.objects.filter(project=project, media_id=sha256)
        .select_related("media")
        .first()
    )
    if link is None:
        raise Http404("No such media in this project")
    media: Media = link.media
    try:
        if media.served_sha256 is None:
            media_strip_metadata(media=media)
        etag = f'"{media.served_sha256}"'
        not_modified = get_conditional_response(request, etag=etag)
        if not_modified is not None:
            return _with_media_headers(not_modified, etag)
        path = Path(settings.MEDIA_ROOT) / media.served_relative_path
        handle = open(path, "rb")  # noqa: SIM115 - FileResponse closes it
    except FileNotFoundError:
        raise Http404("Media file is missing from storage") from None
    return _with_media_headers(FileResponse(handle, content_type=media.content_type), etag)


def _with_media_headers(response: HttpResponseBase, etag: str) -> HttpResponseBase:
    response["ETag"] = etag
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    response["Cache-Control"] = "private, max-age=86400, immutable"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
