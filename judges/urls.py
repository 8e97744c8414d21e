from __future__ import annotations

from django.urls import path

from judges.best_of_n import views as best_of_n_views
from judges.evaluation import views as evaluation_views
from judges.reward_model import views as reward_model_views
from judges.roster import views as roster_views
from judges.runs import views as runs_views

app_name = "judges"
urlpatterns: list = [
    path("", roster_views.judge_list, name="judge-list"),
    path("<int:judge_id>/", roster_views.judge_edit, name="judge-edit"),
    path("p/<slug:slug>/judges/", roster_views.project_judges, name="project-judges"),
    path("p/<slug:slug>/best-of-n/", best_of_n_views.best_of_n_page, name="best-of-n"),
    path(
        "p/<slug:slug>/best-of-n/<int:run_id>/",
        best_of_n_views.best_of_n_run_page,
        name="best-of-n-run",
    ),
    path(
        "p/<slug:slug>/best-of-n/<int:run_id>/<slug:fmt>/",
        best_of_n_views.best_of_n_download,
        name="best-of-n-download",
    ),
    path("p/<slug:slug>/runs/", runs_views.run_list, name="runs"),
    path("p/<slug:slug>/runs/for-pairs/", runs_views.run_for_pairs, name="runs-for-pairs"),
    path("p/<slug:slug>/runs/<int:run_id>/", runs_views.run_detail, name="run"),
    path("p/<slug:slug>/runs/<int:run_id>/cancel/", runs_views.run_cancel, name="run-cancel"),
    path("p/<slug:slug>/runs/<int:run_id>/resume/", runs_views.run_resume, name="run-resume"),
    path("p/<slug:slug>/leaderboard/", evaluation_views.leaderboard_page, name="leaderboard"),
    path("p/<slug:slug>/reward-models/", reward_model_views.training_list, name="training"),
    path(
        "p/<slug:slug>/reward-models/<int:run_id>/",
        reward_model_views.training_detail,
        name="training-run",
    ),
]
