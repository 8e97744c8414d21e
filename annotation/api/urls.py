from __future__ import annotations

from annotation.agreement.api import adjudication
from annotation.agreement.api import report as agreement
from annotation.api.pair_actions import pair_action_view
from annotation.audit import api as audit
from annotation.core import url_converters  # noqa: F401 - registers <version:...>
from annotation.core.routes import routes
from annotation.flags import api as flags
from annotation.imports import api as imports
from annotation.imports import bucket_api as bucket
from annotation.imports import direct_api as direct
from annotation.leaderboard import api as leaderboard
from annotation.projects import api as projects
from annotation.queue import api as queue
from annotation.releases import api as releases
from annotation.webhooks import api as webhooks

urlpatterns = [
    *routes(
        "projects/",
        ("", projects.ProjectListApi.as_view(), "api-projects"),
        ("<slug:slug>/", projects.ProjectDetailApi.as_view(), "api-project"),
        ("<slug:slug>/pairs/", projects.PairListApi.as_view(), "api-pairs"),
        # A pair's id may hold "/" (an Omni-RewardBench pair's is "<task>/<id>",
        # docs/import-format.md): a path, the longer route first.
        (
            "<slug:slug>/pairs/<path:external_id>/adjudicate/",
            pair_action_view(adjudication.AdjudicateApi, "adjudicate"),
            "api-adjudicate",
        ),
        (
            "<slug:slug>/pairs/<path:external_id>/exclude/",
            pair_action_view(projects.PairExcludeApi, "exclude"),
            "api-pair-exclude",
        ),
        (
            "<slug:slug>/pairs/<path:external_id>/include/",
            pair_action_view(projects.PairIncludeApi, "include"),
            "api-pair-include",
        ),
        ("<slug:slug>/pairs/<path:external_id>/", projects.PairDetailApi.as_view(), "api-pair"),
        ("<slug:slug>/imports/", imports.ImportListApi.as_view(), "api-imports"),
        ("<slug:slug>/imports/<int:pk>/", imports.ImportDetailApi.as_view(), "api-import"),
        ("<slug:slug>/imports/stored/", direct.StoredImportApi.as_view(), "api-import-stored"),
        ("<slug:slug>/imports/bucket/", bucket.BucketImportApi.as_view(), "api-import-bucket"),
        ("<slug:slug>/agreement/", agreement.AgreementApi.as_view(), "api-agreement"),
    ),
    *routes(
        "projects/<slug:slug>/uploads/",
        ("", direct.DirectUploadStartApi.as_view(), "api-upload-start"),
        ("part-urls/", direct.DirectUploadPartUrlsApi.as_view(), "api-upload-part-urls"),
        ("parts/", direct.DirectUploadPartsApi.as_view(), "api-upload-parts"),
        ("complete/", direct.DirectUploadCompleteApi.as_view(), "api-upload-complete"),
        ("abort/", direct.DirectUploadAbortApi.as_view(), "api-upload-abort"),
    ),
    *routes(
        "projects/<slug:slug>/model-leaderboard/",
        ("", leaderboard.ModelLeaderboardApi.as_view(), "api-model-leaderboard"),
        ("csv/", leaderboard.ModelLeaderboardCsvApi.as_view(), "api-model-leaderboard-csv"),
    ),
    *routes(
        "projects/<slug:slug>/releases/",
        ("", releases.ReleaseListApi.as_view(), "api-releases"),
        ("<version:version>/", releases.ReleaseDetailApi.as_view(), "api-release"),
        ("<version:version>/build/", releases.ReleaseBuildApi.as_view(), "api-release-build"),
        ("<version:version>/publish/", releases.ReleasePublishApi.as_view(), "api-release-publish"),
        (
            "<version:version>/download/",
            releases.ReleaseDownloadApi.as_view(),
            "api-release-download",
        ),
        ("<version:version>/files/", releases.ReleaseFileListApi.as_view(), "api-release-files"),
        (
            "<version:version>/files/<path:name>",
            releases.ReleaseFileApi.as_view(),
            "api-release-file",
        ),
        ("<version:version>/csv/", releases.ReleaseCsvApi.as_view(), "api-release-csv"),
        ("<version:version>/diff/", releases.ReleaseDiffApi.as_view(), "api-release-diff"),
    ),
    *routes(
        "",
        ("projects/<slug:slug>/claim/", queue.ClaimApi.as_view(), "api-claim"),
        ("projects/<slug:slug>/undo/", queue.UndoApi.as_view(), "api-undo"),
        ("projects/<slug:slug>/me/votes/", queue.MyVotesApi.as_view(), "api-my-votes"),
        ("projects/<slug:slug>/me/speed/", queue.MySpeedApi.as_view(), "api-my-speed"),
        ("assignments/<int:pk>/vote/", queue.VoteApi.as_view(), "api-vote"),
        ("assignments/<int:pk>/skip/", queue.SkipApi.as_view(), "api-skip"),
        ("assignments/<int:pk>/flag/", queue.FlagApi.as_view(), "api-flag"),
    ),
    *routes(
        "projects/<slug:slug>/",
        ("my-flags/", flags.MyFlagsApi.as_view(), "api-my-flags"),
        ("flags/", flags.FlagListApi.as_view(), "api-flags"),
        ("flags/<int:pk>/replies/", flags.FlagReplyApi.as_view(), "api-flag-replies"),
        ("flags/<int:pk>/resolve/", flags.FlagResolveApi.as_view(), "api-flag-resolve"),
    ),
    *routes(
        "projects/<slug:slug>/webhooks/",
        ("", webhooks.WebhookListApi.as_view(), "api-webhooks"),
        ("<int:pk>/", webhooks.WebhookDetailApi.as_view(), "api-webhook"),
        ("<int:pk>/rotate-secret/", webhooks.WebhookRotateApi.as_view(), "api-webhook-rotate"),
        ("<int:pk>/test/", webhooks.WebhookTestApi.as_view(), "api-webhook-test"),
        ("<int:pk>/deliveries/", webhooks.WebhookDeliveriesApi.as_view(), "api-webhook-log"),
        (
            "<int:pk>/deliveries/<int:delivery_id>/redeliver/",
            webhooks.WebhookRedeliverApi.as_view(),
            "api-webhook-redeliver",
        ),
    ),
    *routes(
        "projects/<slug:slug>/audit/",
        ("", audit.AuditLogApi.as_view(), "api-audit"),
    ),
]
