from __future__ import annotations

from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from allauth.mfa.signals import (  # type: ignore[import-untyped]
            authenticator_added,
            authenticator_removed,
        )
        from django.contrib.auth.signals import user_logged_in

        from annotation.accounts import mfa
        from annotation.accounts.password_change import remember_at_login

        # Every way of logging in (the login page, the admin's, tests' force_login) ends in
        # django.contrib.auth.login, which sends this.
        user_logged_in.connect(remember_at_login, dispatch_uid="arbiter-password-change")
        user_logged_in.connect(mfa.remember_at_login, dispatch_uid="arbiter-mfa-required")
        # Two-factor login turned on or off, in the audit log (docs/audit.md).
        authenticator_added.connect(mfa.audit_authenticator_added, dispatch_uid="arbiter-mfa-on")
        authenticator_removed.connect(
            mfa.audit_authenticator_removed, dispatch_uid="arbiter-mfa-off"
        )
