from __future__ import annotations

from allauth.mfa.base import views as mfa_views
from allauth.mfa.totp import views as totp_views
from allauth.socialaccount import views as socialaccount_views
from allauth.socialaccount.providers.openid_connect import views as oidc_views
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
    path("accounts/oidc/<str:provider_id>/login/", oidc_views.login, name="openid_connect_login"),
    path(
        "accounts/oidc/<str:provider_id>/login/callback/",
        oidc_views.callback,
        name="openid_connect_callback",
    ),
    path(
        "accounts/login/cancelled/",
        socialaccount_views.login_cancelled,
        name="socialaccount_login_cancelled",
    ),
    path(
        "accounts/login/error/", socialaccount_views.login_error, name="socialaccount_login_error"
    ),
    # TOTP only, and no reauthentication page: adding a factor needs none, removing one is
    # refused where it is required (annotation/projects/sso.py).
    path("accounts/2fa/", mfa_views.index, name="mfa_index"),
    path("accounts/2fa/authenticate/", mfa_views.authenticate, name="mfa_authenticate"),
    path("accounts/2fa/totp/activate/", totp_views.activate_totp, name="mfa_activate_totp"),
    path("accounts/2fa/totp/deactivate/", totp_views.deactivate_totp, name="mfa_deactivate_totp"),
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
