"""Media bytes, served only to members of a project whose content uses them.

URLs name the project and the media's opaque id (``Media.url_key``, annotation/core/media_keys.py),
nothing else: no content hash an annotator could look up against the public benchmark files,
no model, side or order. What goes out is the served copy, rebuilt without the original's
metadata (made at import, or here on the first request for an image imported before copies
were rebuilt; never the original when that fails), with a fixed content type, ``nosniff``, an
opaque ETag and no ``Last-Modified``. A project with ``media_serve_source`` on sends the
original bytes instead (docs/curators.md, "Serving the original files"), revalidated on every
use so that turning it off takes effect at once. Any kind of media is served the same way, by
its content type and size: single ``Range`` requests answer 206 (a browser seeks in a long
video), HEAD opens nothing, and with ``ARBITER_MEDIA_ACCEL`` the web server sends the bytes
after the checks here (annotation/core/downloads.py; docs/operations.md, "Media through the
web server"). The bytes come from the storage's media area (annotation/core/storage.py): with
the bucket each range is one ranged ``GetObject``, with the same headers as from disk. A
browser session or an API token (``Authorization: Token ...``) identifies the member, so the
media URLs in an API client's assignment work for it too."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, HttpResponseBase
from django.views.decorators.http import require_safe
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from annotation.core import storage
from annotation.core.access import get_project_for_user
from annotation.core.downloads import handed_off_response, ranged_stored_response
from annotation.core.media_keys import URL_KEY, media_etag
from annotation.media.copies import av_copy_outdated, image_copy_outdated
from annotation.media.services import MediaError, media_strip_metadata
from annotation.models import Media, ProjectMedia

# The served copy never changes under its URL; the original may stop being sent at any time.
_CACHE_SERVED = "private, max-age=86400, immutable, no-transform"
_CACHE_SOURCE = "private, no-cache, no-transform"


def _token_user(request):
    """The user of a valid ``Authorization: Token`` header, None without one; raises
    ``AuthenticationFailed`` for a header with a wrong token."""
    found = TokenAuthentication().authenticate(request)
    return found[0] if found else None


@require_safe
def media_file(request, slug: str, media_key: str):
    user = request.user
    if not user.is_authenticated:
        try:
            user = _token_user(request)
        except exceptions.AuthenticationFailed as exc:
            return HttpResponse(str(exc.detail), status=401, content_type="text/plain")
        if user is None:
            return redirect_to_login(request.get_full_path())
    project, _ = get_project_for_user(user, slug)
    if not URL_KEY.fullmatch(media_key):
        # No stored media has another name (a content hash least of all); a NUL would fail
        # the database's text.
        raise Http404("No such media in this project")
    link = (
        ProjectMedia.objects.filter(project=project, media__url_key=media_key)
        .select_related("media")
        .first()
    )
    if link is None:
        raise Http404("No such media in this project")
    media: Media = link.media
    if project.media_serve_source:
        relative_path, content_type, sha256 = media.relative_path, media.content_type, media.sha256
        cache = _CACHE_SOURCE
    else:
        if av_copy_outdated(media):
            # A video or audio file imported before every copy was re-encoded: its remux kept
            # what the remux did not know. Re-encoding takes too long for a request; an
            # operator runs `manage.py strip_media_metadata` (docs/operations.md).
            raise Http404("This media has no re-encoded copy yet")
        try:
            if image_copy_outdated(media):
                media_strip_metadata(media=media, remake=True)
        except FileNotFoundError:
            raise Http404("Media file is missing from storage") from None
        except MediaError:
            # Never the original instead: it may name the model that made it.
            raise Http404("This image cannot be shown: its served copy cannot be made") from None
        relative_path, content_type = media.served_relative_path, media.served_content_type
        sha256, cache = media.served_sha256 or media.sha256, _CACHE_SERVED
    etag = media_etag(sha256)
    response: HttpResponseBase
    try:
        if settings.ARBITER_MEDIA_ACCEL != "off":
            response = handed_off_response(
                request,
                root=storage.local_root("media"),
                relative_path=storage.accel_path("media", relative_path),
                mode=settings.ARBITER_MEDIA_ACCEL,
                nginx_prefix=settings.ARBITER_MEDIA_ACCEL_PREFIX,
                content_type=content_type,
                etag_value=etag,
            )
        else:
            response = ranged_stored_response(
                request,
                area="media",
                name=relative_path,
                content_type=content_type,
                etag_value=etag,
            )
    except FileNotFoundError:
        raise Http404("Media file is missing from storage") from None
    return _with_media_headers(response, f'"{etag}"', cache=cache)


def _with_media_headers(response: HttpResponseBase, etag: str, *, cache: str) -> HttpResponseBase:
    response["ETag"] = etag
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    # no-transform: a proxy that compressed it would break byte ranges.
    response["Cache-Control"] = cache
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
