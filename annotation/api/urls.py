from __future__ import annotations

from django.urls import path

from annotation.api import projects

urlpatterns = [
    path("projects/", projects.ProjectListApi.as_view(), name="api-projects"),
    path("projects/<slug:slug>/", projects.ProjectDetailApi.as_view(), name="api-project"),
    path("projects/<slug:slug>/pairs/", projects.PairListApi.as_view(), name="api-pairs"),
    path(
        "projects/<slug:slug>/pairs/<str:external_id>/",
        projects.PairDetailApi.as_view(),
        name="api-pair",
    ),
]
