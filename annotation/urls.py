from __future__ import annotations

from django.urls import path

from annotation.views import home

urlpatterns = [
    path("", home.home, name="home"),
    path("p/<slug:slug>/", home.project_detail, name="project-detail"),
]
