"""Imports from a prefix of the configured bucket over the API, for a project's curators
(``bucket``): name the prefix and the pairs file in it, then follow the job."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, get_project_for_user
from annotation.imports.api import ImportJobSerializer
from annotation.imports.bucket import import_job_submit_bucket


class BucketImportSerializer(serializers.Serializer):
    prefix = serializers.CharField(
        max_length=400,
        allow_blank=True,
        help_text="A prefix under ARBITER_S3_IMPORT_ROOT; media paths are read under it.",
    )
    file = serializers.CharField(max_length=200, help_text="The pairs file, in the prefix.")


class BucketImportApi(APIView):
    @extend_schema(request=BucketImportSerializer, responses={201: ImportJobSerializer})
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        data = BucketImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = import_job_submit_bucket(
            project=project,
            user=request.user,
            prefix=data.validated_data["prefix"],
            filename=data.validated_data["file"],
        )
        return ApiResponse(ImportJobSerializer(job).data, status=status.HTTP_201_CREATED)
