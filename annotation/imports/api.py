"""Imports over the API, for curators: upload a pairs file (and a media archive), then
follow the job. Small uploads are imported before the response; large ones by a worker."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.middleware import allows_large_upload
from annotation.imports.services import import_job_submit
from annotation.imports.views import ImportForm
from annotation.models import ImportJob


class ImportErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class ImportJobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    created_by = serializers.CharField(source="created_by.get_username", default=None)
    # The job's errors. DRF's metaclass takes declared fields off the class, so this does not
    # replace ``Serializer.errors`` at run time; the stubs only see the class attribute.
    errors = ImportErrorSerializer(many=True)  # type: ignore[assignment]

    class Meta:
        model = ImportJob
        fields = (
            "id",
            "status",
            "filename",
            "created_by",
            "bytes_total",
            "bytes_done",
            "percent",
            "lines_done",
            "created_pairs",
            "existing_pairs",
            "created_media",
            "decided_pairs",
            "errors",
            "attempts",
            "created_at",
            "finished_at",
        )


_FAILED = inline_serializer(
    "ImportRefused",
    {
        "detail": serializers.CharField(),
        "errors": ImportErrorSerializer(many=True),
        "job": ImportJobSerializer(),
    },
)


class ImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text='JSON Lines, or JSON {"pairs": [...]}.')
    media_archive = serializers.FileField(
        required=False, help_text=".zip or .tar.gz with the images the file's paths name."
    )


@allows_large_upload
class ImportListApi(APIView):
    parser_classes = (MultiPartParser, FormParser)

    @extend_schema(responses=ImportJobSerializer(many=True))
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        jobs = ImportJob.objects.filter(project=project).select_related("created_by")[:100]
        return ApiResponse(ImportJobSerializer(jobs, many=True).data)

    @extend_schema(
        request={"multipart/form-data": ImportUploadSerializer},
        responses={
            201: OpenApiResponse(
                ImportJobSerializer,
                description="The job: finished for a small upload, pending for a large one "
                "(poll it).",
            ),
            400: OpenApiResponse(_FAILED, description="Refused: nothing was imported."),
        },
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        form = ImportForm(data=request.data, files=request.FILES)
        if not form.is_valid():
            raise serializers.ValidationError(form.errors.get_json_data())
        job = import_job_submit(
            project=project,
            user=request.user,
            upload=form.cleaned_data["file"],
            archive=form.cleaned_data.get("media_archive"),
        )
        body = ImportJobSerializer(job).data
        if job.status == ImportJob.Status.FAILED:
            return ApiResponse(
                {"detail": "Nothing was imported.", "errors": body["errors"], "job": body},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return ApiResponse(body, status=status.HTTP_201_CREATED)


class ImportDetailApi(APIView):
    @extend_schema(responses=ImportJobSerializer)
    def get(self, request, slug: str, pk: int):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        job = get_object_or_404(
            ImportJob.objects.select_related("created_by"), project=project, pk=pk
        )
        return ApiResponse(ImportJobSerializer(job).data)
