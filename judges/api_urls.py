from __future__ import annotations

from django.urls import path

from judges.best_of_n import api as best_of_n_api
from judges.evaluation import api as evaluation_api
from judges.reward_model import api as reward_model_api
from judges.runs import api as runs_api

urlpatterns: list = [
    path(
        "projects/<slug:slug>/filter-runs/",
        runs_api.FilterRunListApi.as_view(),
        name="api-filter-runs",
    ),
    path(
        "projects/<slug:slug>/filter-runs/<int:number>/",
        runs_api.FilterRunDetailApi.as_view(),
        name="api-filter-run",
    ),
    path(
        "projects/<slug:slug>/filter-runs/<int:number>/cancel/",
        runs_api.FilterRunCancelApi.as_view(),
        name="api-filter-run-cancel",
    ),
    path(
        "projects/<slug:slug>/filter-runs/<int:number>/resume/",
        runs_api.FilterRunResumeApi.as_view(),
        name="api-filter-run-resume",
    ),
    path(
        "projects/<slug:slug>/judge-evaluations/",
        evaluation_api.EvaluationListApi.as_view(),
        name="api-judge-evaluations",
    ),
    path(
        "projects/<slug:slug>/judge-evaluations/<int:evaluation_id>/",
        evaluation_api.EvaluationDetailApi.as_view(),
        name="api-judge-evaluation",
    ),
    path(
        "projects/<slug:slug>/judge-evaluations/<int:evaluation_id>/resume/",
        evaluation_api.EvaluationResumeApi.as_view(),
        name="api-judge-evaluation-resume",
    ),
    path(
        "projects/<slug:slug>/judgements/import/",
        evaluation_api.JudgementImportApi.as_view(),
        name="api-judgements-import",
    ),
    path(
        "projects/<slug:slug>/best-of-n/",
        best_of_n_api.BestOfNApi.as_view(),
        name="api-best-of-n",
    ),
    path(
        "projects/<slug:slug>/training-runs/",
        reward_model_api.TrainingRunListApi.as_view(),
        name="api-training-runs",
    ),
    path(
        "projects/<slug:slug>/training-runs/<int:run_id>/",
        reward_model_api.TrainingRunDetailApi.as_view(),
        name="api-training-run",
    ),
]
