"""Media bytes, served only to members of a project whose content uses them.

URLs name the project and the content hash, nothing else: they reveal no model, side or
order. The original bytes go out unchanged with a fixed content type and ``nosniff``."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.views.decorators.http import require_GET

from annotation.access import get_project_for_user
from annotation.models import Media, ProjectMedia


@require_GET
@login_required
def media_file(request, slug: str, sha256: str):
    project, _ = get_project_for_user(request.user, slug)
    link = (
        ProjectMedia.objects.filter(project=project, media_id=sha256)
        .select_related("media")
        .first()
    )
    if link is None:
        raise Http404("No such media in this project")
    media: Media = link.media
    path = Path(settings.MEDIA_ROOT) / media.relative_path
    try:
        handle = open(path, "rb")  # noqa: SIM115 - FileResponse closes it
    except FileNotFoundError:
        raise Http404("Media file is missing from storage") from None
    response = FileResponse(handle, content_type=media.content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    response["Cache-Control"] = "private, max-age=86400, immutable"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
