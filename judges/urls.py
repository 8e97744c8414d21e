from __future__ import annotations

from django.urls import path

from judges.best_of_n import views as best_of_n_views
from judges.reward_model import views as training_views
from judges.roster import views as judge_views
from judges.runs import views

app_name = "judges"
urlpatterns: list = [
    path("", judge_views.judge_list, name="judge-list"),
    path("<int:judge_id>/", judge_views.judge_edit, name="judge-edit"),
    path("p/<slug:slug>/judges/", judge_views.project_judges, name="project-judges"),
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
    path("p/<slug:slug>/runs/", views.run_list, name="runs"),
    path("p/<slug:slug>/runs/for-pairs/", views.run_for_pairs, name="runs-for-pairs"),
    path("p/<slug:slug>/runs/<int:run_id>/", views.run_detail, name="run"),
    path("p/<slug:slug>/runs/<int:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("p/<slug:slug>/runs/<int:run_id>/resume/", views.run_resume, name="run-resume"),
    path("p/<slug:slug>/leaderboard/", views.leaderboard_page, name="leaderboard"),
    path("p/<slug:slug>/reward-models/", training_views.training_list, name="training"),
    path(
        "p/<slug:slug>/reward-models/<int:run_id>/",
        training_views.training_detail,
        name="training-run",
    ),
]
