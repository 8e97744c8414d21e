from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class ArbiterAdminConfig(AdminConfig):
    """Django's admin app with the operators-only site of ``config/admin.py``."""

    default_site = "config.admin.OperatorAdminSite"
