from __future__ import annotations

from django.urls import path

from judges import training_views, views

app_name = "judges"
urlpatterns: list = [
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
