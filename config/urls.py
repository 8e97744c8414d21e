from __future__ import annotations

from allauth.socialaccount import views as socialaccount_views
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation.accounts.login import LoginView
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
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on and two-factor login (docs/sso.md): allauth's provider and MFA views, and
    # its names for the login and logout pages, which are Arbiter's.
    path("login/", LoginView.as_view(), name="account_login"),
    path("logout/", auth_views.LogoutView.as_view(), name="account_logout"),
    path("accounts/", include("allauth.socialaccount.providers.openid_connect.urls")),
    path(
        "accounts/login/cancelled/",
        socialaccount_views.login_cancelled,
        name="socialaccount_login_cancelled",
    ),
    path(
        "accounts/login/error/", socialaccount_views.login_error, name="socialaccount_login_error"
    ),
    path("accounts/2fa/", include("allauth.mfa.urls")),
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
