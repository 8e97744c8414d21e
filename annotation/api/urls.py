from __future__ import annotations

from django.urls import path

from annotation.api import adjudication, agreement, imports, projects, queue

urlpatterns = [
    path("projects/", projects.ProjectListApi.as_view(), name="api-projects"),
    path("projects/<slug:slug>/", projects.ProjectDetailApi.as_view(), name="api-project"),
    path("projects/<slug:slug>/pairs/", projects.PairListApi.as_view(), name="api-pairs"),
    path(
        "projects/<slug:slug>/pairs/<str:external_id>/",
        projects.PairDetailApi.as_view(),
        name="api-pair",
    ),
    path(
        "projects/<slug:slug>/pairs/<str:external_id>/adjudicate/",
        adjudication.AdjudicateApi.as_view(),
        name="api-adjudicate",
    ),
    path("projects/<slug:slug>/imports/", imports.ImportListApi.as_view(), name="api-imports"),
    path(
        "projects/<slug:slug>/imports/<int:pk>/",
        imports.ImportDetailApi.as_view(),
        name="api-import",
    ),
    path("projects/<slug:slug>/agreement/", agreement.AgreementApi.as_view(), name="api-agreement"),
    path("projects/<slug:slug>/claim/", queue.ClaimApi.as_view(), name="api-claim"),
    path("projects/<slug:slug>/undo/", queue.UndoApi.as_view(), name="api-undo"),
    path("assignments/<int:pk>/vote/", queue.VoteApi.as_view(), name="api-vote"),
    path("assignments/<int:pk>/skip/", queue.SkipApi.as_view(), name="api-skip"),
]
