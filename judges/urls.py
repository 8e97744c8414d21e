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
    # A run's URL carries its number in the project, as its page and the runs list name it.
    *routes(
        "p/<slug:slug>/filter-runs/",
        ("", runs_views.run_list, "runs"),
        ("for-pairs/", runs_views.run_for_pairs, "runs-for-pairs"),
        ("<int:number>/", runs_views.run_detail, "run"),
        ("<int:number>/cancel/", runs_views.run_cancel, "run-cancel"),
        ("<int:number>/resume/", runs_views.run_resume, "run-resume"),
    ),
    # The URLs from before, which carried the run's database id: sent on to the new ones.
    *routes(
        "p/<slug:slug>/runs/",
        ("", runs_views.runs_moved, "runs-moved"),
        ("for-pairs/", runs_views.runs_moved, "runs-for-pairs-moved"),
        ("<int:run_id>/", runs_views.run_moved, "run-moved"),
        ("<int:run_id>/<slug:action>/", runs_views.run_moved, "run-action-moved"),
    ),
    *routes(
        "p/<slug:slug>/",
        ("leaderboard/", evaluation_views.leaderboard_page, "leaderboard"),
        ("reward-models/", reward_model_views.training_list, "training"),
        ("reward-models/<int:run_id>/", reward_model_views.training_detail, "training-run"),
    ),
]
