from __future__ import annotations

from annotation.accounts import views as accounts
from annotation.agreement.views import adjudication
from annotation.agreement.views import report as agreement
from annotation.audit import views as audit
from annotation.core import url_converters  # noqa: F401 - registers <version:...>
from annotation.core.routes import routes
from annotation.flags import views as flags
from annotation.imports import views as imports
from annotation.leaderboard import views as leaderboard
from annotation.media import views as media
from annotation.pairs import views as pairs
from annotation.projects.views import home, invitations, settings
from annotation.queue.views import curator, history, workbench
from annotation.releases import views as releases
from annotation.webhooks import views as webhooks

urlpatterns = [
    *routes(
        "",
        ("", home.home, "home"),
        ("account/", accounts.account, "account"),
        ("account/tokens/", accounts.api_token_new, "account-token-new"),
        (
            "account/tokens/<int:token_id>/revoke/",
            accounts.api_token_revoke_view,
            "account-token-revoke",
        ),
        (
            "account/tokens/command-line/revoke/",
            accounts.command_line_token_revoke_view,
            "account-command-line-token-revoke",
        ),
        ("projects/new/", home.project_new, "project-create"),
        ("invitations/<str:token>/", invitations.invitation_page, "invitation"),
    ),
    *routes(
        "p/<slug:slug>/",
        ("", home.project_detail, "project-detail"),
        ("media/<str:media_key>", media.media_file, "media"),
        ("imports/", imports.imports, "imports"),
        ("imports/<int:job_id>/status/", imports.import_status, "import-status"),
    ),
    *routes(
        "p/<slug:slug>/annotate/",
        ("", workbench.annotate, "annotate"),
        ("<int:assignment_id>/vote/", workbench.vote, "annotate-vote"),
        ("<int:assignment_id>/skip/", workbench.skip, "annotate-skip"),
        ("<int:assignment_id>/flag/", workbench.flag, "annotate-flag"),
        ("flags/", flags.my_flags, "annotate-flags"),
        ("undo/", workbench.undo, "annotate-undo"),
        ("leave/", workbench.leave, "annotate-leave"),
    ),
    *routes("p/<slug:slug>/history/", ("", history.vote_history, "vote-history")),
    *routes(
        "p/<slug:slug>/queue/",
        ("", curator.curator_queue, "curator-queue"),
        ("<slug:action>/", curator.curator_queue_action, "curator-queue-action"),
    ),
    *routes(
        "p/<slug:slug>/adjudication/",
        ("", adjudication.adjudication_queue, "adjudication"),
        ("reapply/", adjudication.adjudication_reapply, "adjudication-reapply"),
        ("<int:pair_id>/", adjudication.adjudication_pair, "adjudication-pair"),
        ("<int:pair_id>/reveal/", adjudication.adjudication_reveal, "adjudication-reveal"),
        ("<int:pair_id>/decide/", adjudication.adjudication_decide, "adjudication-decide"),
    ),
    *routes(
        "p/<slug:slug>/pairs/",
        ("", pairs.pairs_browser, "pairs"),
        ("bulk/<slug:action>/", pairs.pairs_bulk, "pairs-bulk"),
        ("<int:pair_id>/", pairs.pair_detail, "pair"),
        (
            "<int:pair_id>/<slug:action>/",
            pairs.pair_exclusion_page,
            "pair-exclusion",
        ),
        ("<int:pair_id>/flags/<int:flag_id>/reply/", pairs.flag_reply_page, "pair-flag-reply"),
        (
            "<int:pair_id>/flags/<int:flag_id>/resolve/",
            pairs.flag_resolve_page,
            "pair-flag-resolve",
        ),
        ("id/<path:external_id>", pairs.pair_by_external_id, "pair-by-external-id"),
    ),
    *routes(
        "p/<slug:slug>/agreement/",
        ("", agreement.agreement_page, "agreement"),
        ("recompute/", agreement.agreement_recompute, "agreement-recompute"),
        ("csv/<slug:chart>/", agreement.agreement_csv, "agreement-csv"),
        # A path, not a str: any username reverses to a link, "/" in it included.
        ("annotators/<path:username>/", agreement.agreement_annotator, "agreement-annotator"),
    ),
    *routes(
        "p/<slug:slug>/model-leaderboard/",
        ("", leaderboard.model_leaderboard_page, "model-leaderboard"),
    ),
    *routes(
        "p/<slug:slug>/releases/",
        ("", releases.releases, "releases"),
        ("new/", releases.release_create_page, "release-create"),
        ("<version:version>/", releases.release_detail, "release"),
        ("<version:version>/build/", releases.release_build, "release-build"),
        ("<version:version>/publish/", releases.release_publish_page, "release-publish"),
        ("<version:version>/download/", releases.release_download, "release-download"),
        ("<version:version>/files/<path:name>", releases.release_file_download, "release-file"),
        ("<version:version>/csv/", releases.release_csv, "release-csv"),
        ("<version:version>/diff/", releases.release_diff_page, "release-diff"),
    ),
    *routes(
        "p/<slug:slug>/settings/",
        ("", settings.settings_page, "project-settings"),
        ("project/", settings.settings_project, "project-settings-save"),
        ("preview/", settings.guidelines_preview, "project-guidelines-preview"),
        ("members/", settings.settings_member_add, "project-member-add"),
        ("invitations/", invitations.invitation_send, "project-invite"),
        (
            "invitations/<int:invitation_id>/<slug:action>/",
            invitations.invitation_action,
            "project-invitation-action",
        ),
        ("members/<int:membership_id>/role/", settings.settings_member_role, "project-member-role"),
        (
            "members/<int:membership_id>/remove/",
            settings.settings_member_remove,
            "project-member-remove",
        ),
    ),
    *routes(
        "p/<slug:slug>/webhooks/",
        ("", webhooks.webhooks, "webhooks"),
        ("<int:webhook_id>/", webhooks.webhook_detail, "webhook"),
        ("<int:webhook_id>/<slug:action>/", webhooks.webhook_action, "webhook-action"),
        (
            "<int:webhook_id>/deliveries/<int:delivery_id>/redeliver/",
            webhooks.webhook_redeliver,
            "webhook-redeliver",
        ),
    ),
    *routes(
        "p/<slug:slug>/audit/",
        ("", audit.audit_log, "audit"),
        ("audit.csv", audit.audit_csv, "audit-csv"),
    ),
    *routes(
        "audit/",
        ("", audit.site_audit_log, "site-audit"),
        ("audit.csv", audit.site_audit_csv, "site-audit-csv"),
    ),
]
