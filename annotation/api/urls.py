from __future__ import annotations

from django.urls import path

from annotation.agreement.api import adjudication
from annotation.agreement.api import report as agreement
from annotation.core import url_converters  # noqa: F401 - registers <version:...>
from annotation.imports import api as imports
from annotation.leaderboard import api as leaderboard
from annotation.projects import api as projects
from annotation.queue import api as queue
from annotation.releases import api as releases

urlpatterns = [
    path("projects/", projects.ProjectListApi.as_view(), name="api-projects"),
    path("projects/<slug:slug>/", projects.ProjectDetailApi.as_view(), name="api-project"),
    path("projects/<slug:slug>/pairs/", projects.PairListApi.as_view(), name="api-pairs"),
    path(
        "projects/<slug:slug>/pairs/<str:external_id>/",
        projects.PairDetailApi.as_view(),
        name="api-pair",
    ),
    path(
        "projects/<slug:slug>/pairs/<str:external_id>/adjudicate/",
        adjudication.AdjudicateApi.as_view(),
        name="api-adjudicate",
    ),
    path("projects/<slug:slug>/imports/", imports.ImportListApi.as_view(), name="api-imports"),
    path(
        "projects/<slug:slug>/imports/<int:pk>/",
        imports.ImportDetailApi.as_view(),
        name="api-import",
    ),
    path("projects/<slug:slug>/agreement/", agreement.AgreementApi.as_view(), name="api-agreement"),
    path(
        "projects/<slug:slug>/model-leaderboard/",
        leaderboard.ModelLeaderboardApi.as_view(),
        name="api-model-leaderboard",
    ),
    path(
        "projects/<slug:slug>/model-leaderboard/csv/",
        leaderboard.ModelLeaderboardCsvApi.as_view(),
        name="api-model-leaderboard-csv",
    ),
    path("projects/<slug:slug>/releases/", releases.ReleaseListApi.as_view(), name="api-releases"),
    path(
        "projects/<slug:slug>/releases/<version:version>/",
        releases.ReleaseDetailApi.as_view(),
        name="api-release",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/build/",
        releases.ReleaseBuildApi.as_view(),
        name="api-release-build",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/publish/",
        releases.ReleasePublishApi.as_view(),
        name="api-release-publish",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/download/",
        releases.ReleaseDownloadApi.as_view(),
        name="api-release-download",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/files/",
        releases.ReleaseFileListApi.as_view(),
        name="api-release-files",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/files/<path:name>",
        releases.ReleaseFileApi.as_view(),
        name="api-release-file",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/csv/",
        releases.ReleaseCsvApi.as_view(),
        name="api-release-csv",
    ),
    path(
        "projects/<slug:slug>/releases/<version:version>/diff/",
        releases.ReleaseDiffApi.as_view(),
        name="api-release-diff",
    ),
    path("projects/<slug:slug>/claim/", queue.ClaimApi.as_view(), name="api-claim"),
    path("projects/<slug:slug>/undo/", queue.UndoApi.as_view(), name="api-undo"),
    path("assignments/<int:pk>/vote/", queue.VoteApi.as_view(), name="api-vote"),
    path("assignments/<int:pk>/skip/", queue.SkipApi.as_view(), name="api-skip"),
]
