from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation.accounts.password_reset import PasswordResetView
from annotation.projects.views.home import favicon
from config.errors import api_not_found, page_not_found, permission_denied, server_error
from config.health import healthz, readyz
from config.metrics import metrics

api_v1 = [
    path("", include("annotation.api.urls")),
    path("", include("judges.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Its own template: drf-spectacular's has an inline <style>, which the CSP refuses.
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
]
handler403 = permission_denied
handler404 = page_not_found
handler500 = server_error

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password-reset/", PasswordResetView.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password-reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
    path("favicon.ico", favicon, name="favicon"),
    path("api/v1/", include(api_v1)),
    re_path(r"^api/(?P<unmatched>.*)$", api_not_found),
    path("judges/", include("judges.urls")),
    path("", include("annotation.urls")),
]
