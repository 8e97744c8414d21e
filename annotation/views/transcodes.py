"""Retrying a failed transcode from the import page (docs/import-format.md, "Transcoded
copies"). Curators of a project whose content uses the file may retry it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access import CURATORS, get_project_for_user
from annotation.errors import Conflict, Unavailable
from annotation.imports.transcode_jobs import transcode_job_retry
from annotation.models import ProjectMedia, TranscodeJob


@login_required
@require_POST
def transcode_retry(request, slug: str, transcode_id: int):
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    job = TranscodeJob.objects.filter(pk=transcode_id).first()
    if job is None or not ProjectMedia.objects.filter(project=project, media=job.media_id).exists():
        raise Http404("No such transcode in this project")
    try:
        transcode_job_retry(job=job)
    except (Conflict, Unavailable) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "The transcode was sent to a worker again.")
    target = reverse("imports", args=[project.slug])
    if job.import_job_id is not None:
        target += f"?job={job.import_job_id}"
    return redirect(target)
