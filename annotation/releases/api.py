"""Releases over REST (docs/api.md, "Releases"; docs/releases.md): list and create releases,
follow a build, publish, download the archive, single files and the CSV, and diff two
releases. Curators and researchers of the project; annotators get 403, outsiders 404.
A release is never edited: every other method answers 405, saying a change is a new version."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.core.access import STAFF_ROLES, get_project_for_user, get_release_for_user
from annotation.core.errors import NotFound, Unavailable
from annotation.core.strict import StrictInputSerializer
from annotation.models import RELEASE_VERSION_PART_DIGITS, Release
from annotation.releases.diff import releases_compare
from annotation.releases.downloads import (
    release_archive_response,
    release_csv_response,
    release_file_response,
)
from annotation.releases.files import HAS_FILES, release_files
from annotation.releases.files import release_manifest as read_manifest
from annotation.releases.selection import MAX_SPLITS
from annotation.releases.services import (
    release_build_start,
    release_create,
    release_publish,
)

NEVER_EDITED = (
    "A release is never edited through the API: a published release never changes and a "
    "draft keeps its selection. Make a new version (POST /api/v1/projects/{slug}/releases/)."
)


class SplitSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="Lowercase letters, digits and _.")
    ratio = serializers.FloatField(help_text="Above 0, at most 1; the ratios add up to 1.")


class SelectionSerializer(StrictInputSerializer):
    """The fields of docs/releases.md ("Selection"); each one may be left out for its default.
    The service checks the whole (``check_selection``), naming the field it refuses."""

    # A misspelt field would otherwise be dropped silently and its default used.
    unknown_field_message = "Not a selection field (known: {known})."

    include_consensus = serializers.BooleanField(required=False, default=True)
    include_adjudicated = serializers.BooleanField(required=False, default=True)
    include_ties = serializers.BooleanField(required=False, default=False)
    include_ensemble = serializers.BooleanField(required=False, default=False)
    original_media = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The media files as imported (metadata kept) instead of the stripped copies.",
    )
    tasks = serializers.ListField(child=serializers.CharField(), required=False)
    criteria = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    min_agreement = serializers.FloatField(required=False, allow_null=True)
    # ``many=True`` makes a ListSerializer, which takes max_length; the stubs do not know it.
    splits = SplitSerializer(  # type: ignore[call-arg]
        many=True, required=False, max_length=MAX_SPLITS
    )
    seed = serializers.IntegerField(required=False, default=0)


class DiffRowSerializer(serializers.Serializer):
    id = serializers.CharField()
    # DRF's metaclass takes declared fields off the class, so this does not replace
    # ``Field.label`` at run time; the stubs only see the class attribute.
    label = serializers.CharField()  # type: ignore[assignment]
    task = serializers.CharField()
    split = serializers.CharField()


class RelabelledSerializer(serializers.Serializer):
    id = serializers.CharField()
    before = serializers.CharField(help_text="The label in the release compared with.")
    after = serializers.CharField(help_text="The label in this release.")
    task = serializers.CharField()


class DiffSerializer(serializers.Serializer):
    release = serializers.CharField()
    against = serializers.CharField()
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="added, removed, relabelled, unchanged"
    )
    added = DiffRowSerializer(many=True, help_text="In this release, not in the other.")
    removed = DiffRowSerializer(many=True, help_text="In the other release, not in this.")
    relabelled = RelabelledSerializer(many=True)


class ReleaseSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    archive_name = serializers.CharField(read_only=True)
    created_by = serializers.CharField(source="created_by.get_username", default=None)
    published_by = serializers.CharField(source="published_by.get_username", default=None)
    url = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields: tuple[str, ...] = (
            "version",
            "status",
            "stage",
            "percent",
            "rows_done",
            "rows_total",
            "error",
            "selection",
            "pair_count",
            "manifest_sha256",
            "archive_name",
            "archive_sha256",
            "archive_size",
            "created_by",
            "created_at",
            "build_started_at",
            "build_finished_at",
            "published_at",
            "published_by",
            "url",
        )

    def get_url(self, release: Release) -> str:
        return reverse("api-release", args=[release.project.slug, release.version])


class ReleaseDetailSerializer(ReleaseSerializer):
    manifest = serializers.SerializerMethodField(
        help_text="manifest.json once built (docs/releases.md, 'Manifest'); null before."
    )

    class Meta(ReleaseSerializer.Meta):
        fields = (*ReleaseSerializer.Meta.fields, "statistics", "card", "manifest")

    def get_manifest(self, release: Release) -> dict | None:
        return read_manifest(release) if release.status in HAS_FILES else None


class _FirstRendererNegotiation(DefaultContentNegotiation):
    """A download answers with its file's own type, whatever renderers DRF knows: a client
    asking ``Accept: application/gzip`` gets the archive, not 406."""

    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except exceptions.NotAcceptable:
            return renderers[0], renderers[0].media_type


class _ReleaseApi(APIView):
    def http_method_not_allowed(self, request, *args, **kwargs):
        raise exceptions.MethodNotAllowed(
            request.method,
            detail=f"{request.method} is not allowed here. "
            + NEVER_EDITED.replace("{slug}", kwargs.get("slug", "{slug}")),
        )


class _DownloadApi(_ReleaseApi):
    content_negotiation_class = _FirstRendererNegotiation


def _detail(release: Release) -> dict:
    return ReleaseDetailSerializer(release).data


def _start_build(release: Release) -> None:
    try:
        release_build_start(release=release)
    except Unavailable as exc:
        raise Unavailable(
            f"Release {release.version} is saved as a draft, but its build could not be "
            f"queued: {exc} Start it with POST .../releases/{release.version}/build/."
        ) from exc


def _download_responses(media_type: str) -> dict:
    binary = OpenApiTypes.BINARY
    return {
        (200, media_type): OpenApiResponse(binary, description="The whole file, streamed."),
        (206, media_type): OpenApiResponse(binary, description="The one range asked (Range)."),
        304: OpenApiResponse(description="If-None-Match names the current ETag (its sha256)."),
        404: OpenApiResponse(description="No such release, or no such file in its manifest."),
        409: OpenApiResponse(description="The release is not published yet."),
        416: OpenApiResponse(description="The range starts past the end of the file."),
    }


class ReleaseListApi(_ReleaseApi):
    class InputSerializer(serializers.Serializer):
        # Checked by the service's check_version, the one rule of a valid version.
        version = serializers.CharField(
            max_length=32,
            help_text=f"X.Y.Z, unique in the project; each part at most "
            f"{RELEASE_VERSION_PART_DIGITS} digits, no leading zeros.",
        )
        selection = SelectionSerializer(required=False)

    @extend_schema(responses=ReleaseSerializer(many=True), summary="The project's releases")
    def get(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        releases = Release.objects.filter(project=project).select_related(
            "project", "created_by", "published_by"
        )
        return ApiResponse(ReleaseSerializer(releases, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OpenApiResponse(
                ReleaseDetailSerializer, description="Created; its build is queued."
            ),
            400: OpenApiResponse(description="A field refused, named in the answer."),
            409: OpenApiResponse(description="The project has this version already."),
            503: OpenApiResponse(description="Saved as a draft; the task queue is down."),
        },
        summary="Create a release and build it",
    )
    def post(self, request, slug: str):
        project, _ = get_project_for_user(request.user, slug, roles=STAFF_ROLES)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        release = release_create(
            project=project,
            version=serializer.validated_data["version"],
            selection=serializer.validated_data.get("selection"),
            user=request.user,
        )
        _start_build(release)
        release.refresh_from_db()
        return ApiResponse(_detail(release), status=status.HTTP_201_CREATED)


class ReleaseDetailApi(_ReleaseApi):
    @extend_schema(
        responses=ReleaseDetailSerializer,
        summary="A release: its build progress, statistics, card and manifest",
    )
    def get(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        return ApiResponse(_detail(release))


class ReleaseBuildApi(_ReleaseApi):
    @extend_schema(
        request=None,
        responses={
            202: ReleaseDetailSerializer,
            409: OpenApiResponse(description="Published, or building already."),
            503: OpenApiResponse(description="The task queue is down; nothing changed."),
        },
        summary="Build a draft, built or failed release (again)",
    )
    def post(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        _start_build(release)
        release.refresh_from_db()
        return ApiResponse(_detail(release), status=status.HTTP_202_ACCEPTED)


class ReleasePublishApi(_ReleaseApi):
    @extend_schema(
        request=None,
        responses={
            200: ReleaseDetailSerializer,
            409: OpenApiResponse(description="Not built, published already, or files changed."),
        },
        summary="Publish a built release for good",
    )
    def post(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        return ApiResponse(_detail(release_publish(release=release, user=request.user)))


class ReleaseDownloadApi(_DownloadApi):
    @extend_schema(responses=_download_responses("application/gzip"), summary="The .tar.gz")
    def get(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        return release_archive_response(request, release)


class ReleaseFileListApi(_ReleaseApi):
    class OutputSerializer(serializers.Serializer):
        name = serializers.CharField()
        size = serializers.IntegerField()
        sha256 = serializers.CharField()
        url = serializers.CharField(help_text="Where to download it, once published.")

    @extend_schema(responses=OutputSerializer(many=True), summary="The release's files")
    def get(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        rows = [
            {
                "name": entry.name,
                "size": entry.size,
                "sha256": entry.sha256,
                "url": reverse("api-release-file", args=[slug, release.version, entry.name]),
            }
            for entry in release_files(release)
        ]
        return ApiResponse(self.OutputSerializer(rows, many=True).data)


class ReleaseFileApi(_DownloadApi):
    @extend_schema(
        responses=_download_responses("application/octet-stream"),
        summary="One file of the release, by the name its manifest lists",
    )
    def get(self, request, slug: str, version: str, name: str):
        release, _ = get_release_for_user(request.user, slug, version)
        return release_file_response(request, release, name)


class ReleaseCsvApi(_DownloadApi):
    @extend_schema(
        responses={
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="A row per pair, formulas neutralised."
            ),
            409: OpenApiResponse(description="The release is not published yet."),
        },
        summary="The release as CSV, for spreadsheets",
    )
    def get(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        return release_csv_response(release)


class ReleaseDiffApi(_ReleaseApi):
    class InputSerializer(serializers.Serializer):
        against = serializers.RegexField(
            r"^[0-9]+\.[0-9]+\.[0-9]+$",
            help_text="The version to compare with, X.Y.Z.",
            error_messages={"invalid": "Must be a version, X.Y.Z."},
        )

    @extend_schema(
        parameters=[OpenApiParameter("against", str, required=True, description="X.Y.Z")],
        responses={
            200: DiffSerializer,
            404: OpenApiResponse(description="No such release in the project."),
            409: OpenApiResponse(description="One of the two is not built yet."),
        },
        summary="Pairs added, removed and relabelled against another release",
    )
    def get(self, request, slug: str, version: str):
        release, _ = get_release_for_user(request.user, slug, version)
        serializer = self.InputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        against_version = serializer.validated_data["against"]
        against = Release.objects.filter(project=release.project, version=against_version).first()
        if against is None:
            raise NotFound(f"against: {slug} has no release {against_version}.")
        diff = releases_compare(release=release, against=against)
        return ApiResponse(
            DiffSerializer(
                {
                    "release": release.version,
                    "against": against.version,
                    "counts": diff.counts,
                    "added": diff.added,
                    "removed": diff.removed,
                    "relabelled": diff.relabelled,
                }
            ).data
        )
