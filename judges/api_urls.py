from __future__ import annotations

from django.urls import path

from judges import api, training_api

urlpatterns: list = [
    path(
        "projects/<slug:slug>/filter-runs/", api.FilterRunListApi.as_view(), name="api-filter-runs"
    ),
    path(
        "projects/<slug:slug>/filter-runs/<int:run_id>/",
        api.FilterRunDetailApi.as_view(),
        name="api-filter-run",
    ),
    path(
        "projects/<slug:slug>/filter-runs/<int:run_id>/cancel/",
        api.FilterRunCancelApi.as_view(),
        name="api-filter-run-cancel",
    ),
    path(
        "projects/<slug:slug>/filter-runs/<int:run_id>/resume/",
        api.FilterRunResumeApi.as_view(),
        name="api-filter-run-resume",
    ),
    path(
        "projects/<slug:slug>/training-runs/",
        training_api.TrainingRunListApi.as_view(),
        name="api-training-runs",
    ),
    path(
        "projects/<slug:slug>/training-runs/<int:run_id>/",
        training_api.TrainingRunDetailApi.as_view(),
        name="api-training-run",
    ),
]
