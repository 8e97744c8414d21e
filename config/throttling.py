"""Per-token request rates for the REST API (docs/api.md, "Rate limits"): DRF's throttling,
counted per API token (per user for a browser session, per address without either), with the
rates of ``ARBITER_API_THROTTLE_RATE`` and, for the annotator's claim, vote, skip and undo,
``ARBITER_API_THROTTLE_ANNOTATE_RATE``. A request over its rate is a 429 with
``Retry-After``."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import SimpleRateThrottle

# The cache alias counting requests (config/settings.py: Redis when
# ARBITER_API_THROTTLE_REDIS_URL is set, shared by every web process; else per process).
THROTTLE_CACHE = "throttle"


class ApiTokenThrottle(SimpleRateThrottle):
    """Every endpoint's rate, ``ARBITER_API_THROTTLE_RATE`` (None: not limited)."""

    scope = "api"
    setting = "ARBITER_API_THROTTLE_RATE"

    def __init__(self) -> None:
        # SimpleRateThrottle reads its rate and cache once per class; these are read per
        # request, so a changed setting applies at once.
        self.cache = caches[THROTTLE_CACHE]
        super().__init__()

    def get_rate(self) -> str | None:
        return getattr(settings, self.setting)

    def get_cache_key(self, request, view) -> str:
        token = getattr(request.auth, "pk", None)  # a command-line token's pk is its key
        if token is not None:
            kind = type(request.auth).__name__
            ident = f"{kind}:" + hashlib.sha256(str(token).encode()).hexdigest()[:32]
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = "addr:" + (self.get_ident(request) or "")
        return f"throttle:{self.scope}:{ident}"


class AnnotatorLoopThrottle(ApiTokenThrottle):
    """The annotator's loop (claim, vote, skip, undo): its own rate, high enough that no
    person reaches it, counted apart from the rest of the API."""

    scope = "annotate"
    setting = "ARBITER_API_THROTTLE_ANNOTATE_RATE"
