"""The curator's import page: upload a pairs file (and a media archive; with object storage,
large files straight to the bucket, or an import from a bucket prefix), follow the import's
progress, read why an import was refused (line and field), and see the project's past
imports. An upload from the form always runs as a job in a worker, whatever its size: the
page answers at once and polls the job's progress (``import_status``), so no request waits
for an import, which a web server's timeout would cut while the import went on."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotation.core import storage
from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.errors import DomainError
from annotation.core.middleware import allows_large_upload
from annotation.imports.bucket import import_job_submit_bucket
from annotation.imports.direct import ARCHIVE_SUFFIXES, PAIR_FILE_SUFFIXES, bucket_origin
from annotation.imports.services import import_job_submit
from annotation.models import ImportJob


class ImportForm(forms.Form):
    file = forms.FileField(
        label="Pairs file",
        help_text='JSON Lines (one pair per line) or JSON {"pairs": [...]}.',
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(PAIR_FILE_SUFFIXES)}),
    )
    media_archive = forms.FileField(
        label="Media archive",
        required=False,
        help_text="Optional .zip or .tar.gz holding the images the file's paths name.",
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,.tar.gz,.tgz"}),
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if not upload.name.lower().endswith(PAIR_FILE_SUFFIXES):
            raise forms.ValidationError("Upload a .jsonl or .json file.")
        return upload

    def clean_media_archive(self):
        archive = self.cleaned_data.get("media_archive")
        if archive and not archive.name.lower().endswith(ARCHIVE_SUFFIXES):
            raise forms.ValidationError("Upload a .zip or .tar.gz archive.")
        return archive

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        upload, archive = cleaned.get("file"), cleaned.get("media_archive")
        size = (upload.size if upload else 0) + (archive.size if archive else 0)
        if size > settings.ARBITER_MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                f"The upload is larger than {settings.ARBITER_MAX_UPLOAD_BYTES:,} bytes."
            )
        return cleaned


class BucketImportForm(forms.Form):
    bucket_prefix = forms.CharField(
        label="Bucket prefix",
        max_length=400,
        required=False,
        help_text="A folder under the import root of the bucket; media paths are read under it.",
    )
    file = forms.CharField(
        label="Pairs file", max_length=200, help_text="Its name in the prefix: pairs.jsonl."
    )


@allows_large_upload
@login_required
@require_http_methods(["GET", "POST"])
def imports(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=CURATORS)
    form, bucket_form = ImportForm(), BucketImportForm()
    status = 200
    if request.method == "POST" and "bucket_prefix" in request.POST:
        bucket_form = BucketImportForm(request.POST)
        if bucket_form.is_valid():
            try:
                submitted = import_job_submit_bucket(
                    project=project,
                    user=request.user,
                    prefix=bucket_form.cleaned_data["bucket_prefix"],
                    filename=bucket_form.cleaned_data["file"],
                )
                return _job_page(project, submitted)
            except DomainError as exc:
                bucket_form.add_error(None, str(exc))
        status = 400
    elif request.method == "POST":
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            submitted = import_job_submit(
                project=project,
                user=request.user,
                upload=form.cleaned_data["file"],
                archive=form.cleaned_data.get("media_archive"),
                in_background=True,
            )
            return _job_page(project, submitted)
        status = 400
    jobs = ImportJob.objects.filter(project=project).select_related("created_by")[:50]
    job = None
    if request.GET.get("job", "").isdigit():
        job = ImportJob.objects.filter(project=project, pk=request.GET["job"]).first()
    context = {
        "project": project,
        "role": role,
        "form": form,
        "bucket_form": bucket_form,
        "jobs": jobs,
        "job": job,
        "in_bucket": storage.is_s3(),
    }
    response = render(request, "annotation/imports.html", context, status=status)
    if storage.is_s3():
        # The page's parts go straight to the bucket (static/js/direct_upload.js).
        response._csp_update = {"connect-src": [bucket_origin()]}  # type: ignore[attr-defined]
    return response


def _job_page(project, job: ImportJob):
    return redirect(f"{reverse('imports', args=[project.slug])}?job={job.pk}")


@login_required
@require_GET
def import_status(request, slug: str, job_id: int):
    """The polled fragment: a progress bar while running, the outcome once finished."""
    project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
    job = get_object_or_404(ImportJob, project=project, pk=job_id)
    return render(
        request, "annotation/imports.html#import_status", {"project": project, "job": job}
    )
