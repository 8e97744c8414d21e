from __future__ import annotations

from django.urls import path

from annotation.views import home, media

urlpatterns = [
    path("", home.home, name="home"),
    path("p/<slug:slug>/", home.project_detail, name="project-detail"),
    path("p/<slug:slug>/media/<str:sha256>", media.media_file, name="media"),
]
