"""The API behind the import page's uploads straight to the bucket (``direct``), for a
project's curators: start a multipart upload, get presigned URLs for its parts, list the parts
already there, complete or abort it, then start the import from the completed uploads.
Every call names its upload by the token ``start`` returned; a token works only for its
curator in its project."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import CURATORS, get_project_for_user
from annotation.imports import direct
from annotation.imports.api import ImportJobSerializer
from annotation.imports.services import StoredUpload, import_job_submit_stored


class StartSerializer(serializers.Serializer):
    field = serializers.ChoiceField(choices=tuple(direct.FIELDS), default="file")
    filename = serializers.CharField(max_length=255)
    size = serializers.IntegerField(min_value=1)


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=2000)


class PartsSerializer(TokenSerializer):
    numbers = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=direct.MAX_PARTS),
        min_length=1,
        max_length=100,
    )


class StoredImportSerializer(serializers.Serializer):
    file = serializers.CharField(max_length=2000, help_text="The pairs file's upload token.")
    media_archive = serializers.CharField(
        max_length=2000, required=False, help_text="The media archive's upload token."
    )


_STARTED = inline_serializer(
    "DirectUploadStarted",
    {
        "token": serializers.CharField(),
        "part_bytes": serializers.IntegerField(),
        "part_count": serializers.IntegerField(),
    },
)
_PART = inline_serializer(
    "DirectUploadPart",
    {
        "number": serializers.IntegerField(),
        "size": serializers.IntegerField(),
        "etag": serializers.CharField(),
    },
)


class _UploadApi(APIView):
    """A call naming an upload by its token, from a curator of the project."""

    def upload(self, request, slug: str, serializer_class=TokenSerializer):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        data = serializer_class(data=request.data)
        data.is_valid(raise_exception=True)
        upload = direct.direct_upload_check(
            token=data.validated_data["token"], project=project, user=request.user
        )
        return upload, data.validated_data


class DirectUploadStartApi(APIView):
    @extend_schema(request=StartSerializer, responses={201: _STARTED})
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        data = StartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = direct.direct_upload_start(
            project=project, user=request.user, **data.validated_data
        )
        body = {
            "token": upload.token,
            "part_bytes": upload.part_bytes,
            "part_count": upload.part_count,
        }
        return ApiResponse(body, status=status.HTTP_201_CREATED)


class DirectUploadPartUrlsApi(_UploadApi):
    @extend_schema(
        request=PartsSerializer,
        responses=inline_serializer("DirectUploadPartUrls", {"urls": serializers.DictField()}),
    )
    def post(self, request, slug: str):
        upload, data = self.upload(request, slug, PartsSerializer)
        urls = direct.direct_upload_part_urls(upload=upload, numbers=data["numbers"])
        return ApiResponse({"urls": {str(number): url for number, url in urls.items()}})


class DirectUploadPartsApi(_UploadApi):
    @extend_schema(
        request=TokenSerializer,
        responses=inline_serializer("DirectUploadParts", {"parts": _PART}),
    )
    def post(self, request, slug: str):
        upload, _ = self.upload(request, slug)
        return ApiResponse({"parts": direct.direct_upload_parts(upload=upload)})


class DirectUploadCompleteApi(_UploadApi):
    @extend_schema(
        request=TokenSerializer,
        responses=inline_serializer("DirectUploadCompleted", {"size": serializers.IntegerField()}),
    )
    def post(self, request, slug: str):
        upload, _ = self.upload(request, slug)
        return ApiResponse({"size": direct.direct_upload_complete(upload=upload)})


class DirectUploadAbortApi(_UploadApi):
    @extend_schema(request=TokenSerializer, responses={204: None})
    def post(self, request, slug: str):
        upload, _ = self.upload(request, slug)
        direct.direct_upload_abort(upload=upload)
        return ApiResponse(status=status.HTTP_204_NO_CONTENT)


class StoredImportApi(APIView):
    @extend_schema(request=StoredImportSerializer, responses={201: ImportJobSerializer})
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=CURATORS)
        data = StoredImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        stored = {
            field: _stored(project, request.user, field, token)
            for field, token in data.validated_data.items()
        }
        job = import_job_submit_stored(
            project=project,
            user=request.user,
            upload=stored["file"],
            archive=stored.get("media_archive"),
        )
        return ApiResponse(ImportJobSerializer(job).data, status=status.HTTP_201_CREATED)


def _stored(project, user, field: str, token: str) -> StoredUpload:
    upload = direct.direct_upload_check(token=token, project=project, user=user)
    if upload.field != field:
        raise serializers.ValidationError({field: f"This token is a {upload.field}'s upload."})
    key, size = direct.direct_upload_stored(upload=upload)
    return StoredUpload(key=key, size=size, filename=upload.filename)
