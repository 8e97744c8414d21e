from __future__ import annotations

from django.urls import path

from judges.evaluation import api as api_evaluations
from judges.reward_model import api as training_api
from judges.runs import api

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
        "projects/<slug:slug>/judge-evaluations/",
        api_evaluations.EvaluationListApi.as_view(),
        name="api-judge-evaluations",
    ),
    path(
        "projects/<slug:slug>/judge-evaluations/<int:evaluation_id>/",
        api_evaluations.EvaluationDetailApi.as_view(),
        name="api-judge-evaluation",
    ),
    path(
        "projects/<slug:slug>/judge-evaluations/<int:evaluation_id>/resume/",
        api_evaluations.EvaluationResumeApi.as_view(),
        name="api-judge-evaluation-resume",
    ),
    path(
        "projects/<slug:slug>/judgements/import/",
        api_evaluations.JudgementImportApi.as_view(),
        name="api-judgements-import",
    ),
    path(
        "projects/<slug:slug>/best-of-n/",
        api_evaluations.BestOfNApi.as_view(),
        name="api-best-of-n",
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
