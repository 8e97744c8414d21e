from __future__ import annotations

from annotation.core.routes import routes
from judges.best_of_n import views as best_of_n_views
from judges.evaluation import views as evaluation_views
from judges.reward_model import views as reward_model_views
from judges.roster import views as roster_views
from judges.runs import views as runs_views

app_name = "judges"
urlpatterns: list = [
    *routes(
        "",
        ("", roster_views.judge_list, "judge-list"),
        ("<int:judge_id>/", roster_views.judge_edit, "judge-edit"),
        ("p/<slug:slug>/judges/", roster_views.project_judges, "project-judges"),
    ),
    *routes(
        "p/<slug:slug>/best-of-n/",
        ("", best_of_n_views.best_of_n_page, "best-of-n"),
        ("<int:run_id>/", best_of_n_views.best_of_n_run_page, "best-of-n-run"),
        ("<int:run_id>/<slug:fmt>/", best_of_n_views.best_of_n_download, "best-of-n-download"),
    ),
    *routes(
        "p/<slug:slug>/runs/",
        ("", runs_views.run_list, "runs"),
        ("for-pairs/", runs_views.run_for_pairs, "runs-for-pairs"),
        ("<int:run_id>/", runs_views.run_detail, "run"),
        ("<int:run_id>/cancel/", runs_views.run_cancel, "run-cancel"),
        ("<int:run_id>/resume/", runs_views.run_resume, "run-resume"),
    ),
    *routes(
        "p/<slug:slug>/",
        ("leaderboard/", evaluation_views.leaderboard_page, "leaderboard"),
        ("reward-models/", reward_model_views.training_list, "training"),
        ("reward-models/<int:run_id>/", reward_model_views.training_detail, "training-run"),
    ),
]
