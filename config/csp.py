"""django-csp's middleware with the policy built once a process, not once a response.

Every page and API answer carries the same Content-Security-Policy header (settings'
``CONTENT_SECURITY_POLICY``): no view here adds a nonce or changes the policy. django-csp
builds the header from the settings on every response, about a tenth of a millisecond of the
annotator's vote; this builds it on the first response and reuses the string. A response or
request that does use django-csp's per-view parts (a nonce asked for, a decorator's update,
replace or exemption) goes through django-csp's own code unchanged.
"""

from __future__ import annotations

import http.client as http_client

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject
from csp.middleware import CSPMiddleware as DjangoCSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

# What a response without per-view parts gets: (header, value) pairs, built once.
_policies: list[tuple[str, str]] | None = None
_PER_VIEW = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_exempt",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
    "_csp_exempt_ro",
)
_DEBUG_EXEMPT = (http_client.INTERNAL_SERVER_ERROR, http_client.NOT_FOUND)


def _built() -> list[tuple[str, str]]:
    """The headers django-csp builds when no view changed the policy, each with its value."""
    global _policies
    if _policies is None:
        _policies = [
            (header, policy)
            for header, policy in (
                (HEADER, build_policy()),
                (HEADER_REPORT_ONLY, build_policy(report_only=True)),
            )
            if policy
        ]
    return _policies


@receiver(setting_changed)
def _forget_policies(*, setting: str, **_) -> None:
    global _policies
    if setting.startswith("CONTENT_SECURITY_POLICY"):
        _policies = None  # built again on the next response


def _excluded(request, header: str) -> bool:
    name = "CONTENT_SECURITY_POLICY" if header == HEADER else "CONTENT_SECURITY_POLICY_REPORT_ONLY"
    prefixes = (getattr(settings, name, None) or {}).get("EXCLUDE_URL_PREFIXES") or ()
    return bool(prefixes) and request.path_info.startswith(tuple(prefixes))


class CSPMiddleware(DjangoCSPMiddleware):
    """``csp.middleware.CSPMiddleware``, the same headers, the constant policy reused."""

    def process_response(self, request, response):
        if getattr(request, "_csp_nonce", None) is not None or any(
            hasattr(response, name) for name in _PER_VIEW
        ):
            return super().process_response(request, response)
        if response.status_code in _DEBUG_EXEMPT and settings.DEBUG:
            return response
        for header, policy in _built():
            if header not in response and not _excluded(request, header):
                response[header] = policy
        # As django-csp does: a nonce asked for after the header is written is an error.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response
