from __future__ import annotations

from django.urls import path

from annotation.accounts import views as accounts
from annotation.agreement.views import adjudication
from annotation.agreement.views import report as agreement
from annotation.core import url_converters  # noqa: F401 - registers <version:...>
from annotation.imports import views as imports
from annotation.media import views as media
from annotation.pairs import views as pairs
from annotation.projects.views import home, settings
from annotation.queue.views import curator, workbench
from annotation.releases import views as releases

urlpatterns = [
    path("", home.home, name="home"),
    path("account/", accounts.account, name="account"),
    path("projects/new/", home.project_new, name="project-create"),
    path("p/<slug:slug>/", home.project_detail, name="project-detail"),
    path("p/<slug:slug>/media/<str:sha256>", media.media_file, name="media"),
    path("p/<slug:slug>/imports/", imports.imports, name="imports"),
    path("p/<slug:slug>/imports/<int:job_id>/status/", imports.import_status, name="import-status"),
    path(
        "p/<slug:slug>/imports/transcodes/<int:transcode_id>/retry/",
        imports.transcode_retry,
        name="transcode-retry",
    ),
    path("p/<slug:slug>/annotate/", workbench.annotate, name="annotate"),
    path("p/<slug:slug>/annotate/<int:assignment_id>/vote/", workbench.vote, name="annotate-vote"),
    path("p/<slug:slug>/annotate/<int:assignment_id>/skip/", workbench.skip, name="annotate-skip"),
    path("p/<slug:slug>/annotate/undo/", workbench.undo, name="annotate-undo"),
    path("p/<slug:slug>/queue/", curator.curator_queue, name="curator-queue"),
    path(
        "p/<slug:slug>/queue/<slug:action>/",
        curator.curator_queue_action,
        name="curator-queue-action",
    ),
    path("p/<slug:slug>/adjudication/", adjudication.adjudication_queue, name="adjudication"),
    path(
        "p/<slug:slug>/adjudication/reapply/",
        adjudication.adjudication_reapply,
        name="adjudication-reapply",
    ),
    path(
        "p/<slug:slug>/adjudication/<int:pair_id>/",
        adjudication.adjudication_pair,
        name="adjudication-pair",
    ),
    path(
        "p/<slug:slug>/adjudication/<int:pair_id>/reveal/",
        adjudication.adjudication_reveal,
        name="adjudication-reveal",
    ),
    path(
        "p/<slug:slug>/adjudication/<int:pair_id>/decide/",
        adjudication.adjudication_decide,
        name="adjudication-decide",
    ),
    path("p/<slug:slug>/pairs/", pairs.pairs_browser, name="pairs"),
    path("p/<slug:slug>/pairs/bulk/<slug:action>/", pairs.pairs_bulk, name="pairs-bulk"),
    path("p/<slug:slug>/pairs/<int:pair_id>/", pairs.pair_detail, name="pair"),
    path(
        "p/<slug:slug>/pairs/id/<path:external_id>",
        pairs.pair_by_external_id,
        name="pair-by-external-id",
    ),
    path("p/<slug:slug>/agreement/", agreement.agreement_page, name="agreement"),
    path(
        "p/<slug:slug>/agreement/recompute/",
        agreement.agreement_recompute,
        name="agreement-recompute",
    ),
    path(
        "p/<slug:slug>/agreement/csv/<slug:chart>/", agreement.agreement_csv, name="agreement-csv"
    ),
    # A path, not a str: any username reverses to a link, "/" in it included.
    path(
        "p/<slug:slug>/agreement/annotators/<path:username>/",
        agreement.agreement_annotator,
        name="agreement-annotator",
    ),
    path("p/<slug:slug>/releases/", releases.releases, name="releases"),
    path("p/<slug:slug>/releases/new/", releases.release_create_page, name="release-create"),
    path("p/<slug:slug>/releases/<version:version>/", releases.release_detail, name="release"),
    path(
        "p/<slug:slug>/releases/<version:version>/build/",
        releases.release_build,
        name="release-build",
    ),
    path(
        "p/<slug:slug>/releases/<version:version>/publish/",
        releases.release_publish_page,
        name="release-publish",
    ),
    path(
        "p/<slug:slug>/releases/<version:version>/download/",
        releases.release_download,
        name="release-download",
    ),
    path(
        "p/<slug:slug>/releases/<version:version>/files/<path:name>",
        releases.release_file_download,
        name="release-file",
    ),
    path("p/<slug:slug>/releases/<version:version>/csv/", releases.release_csv, name="release-csv"),
    path(
        "p/<slug:slug>/releases/<version:version>/diff/",
        releases.release_diff_page,
        name="release-diff",
    ),
    path("p/<slug:slug>/settings/", settings.settings_page, name="project-settings"),
    path(
        "p/<slug:slug>/settings/project/", settings.settings_project, name="project-settings-save"
    ),
    path(
        "p/<slug:slug>/settings/preview/",
        settings.guidelines_preview,
        name="project-guidelines-preview",
    ),
    path(
        "p/<slug:slug>/settings/members/", settings.settings_member_add, name="project-member-add"
    ),
    path(
        "p/<slug:slug>/settings/members/<int:membership_id>/role/",
        settings.settings_member_role,
        name="project-member-role",
    ),
    path(
        "p/<slug:slug>/settings/members/<int:membership_id>/remove/",
        settings.settings_member_remove,
        name="project-member-remove",
    ),
]
