"""The API's limits, read by config/settings.py: how long tokens last and the per-token request
rates (config/throttling.py, docs/api.md "Rate limits"), and the cache the rates are counted in."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from config.env import env_int, env_rate, env_str

_TESTS = env_str("ARBITER_ENV", "development") == "test"

# API tokens expire this many days after they are made (named tokens from the account page
# and command-line ones alike); 0, the default, keeps them until revoked.
ARBITER_API_TOKEN_DAYS = env_int("ARBITER_API_TOKEN_DAYS", 0)
if ARBITER_API_TOKEN_DAYS < 0:
    raise ImproperlyConfigured("ARBITER_API_TOKEN_DAYS must be 0 (never) or a number of days")

# Every API endpoint but the annotator's loop, per token (per user for a session). The test
# suite counts nothing unless a test sets a rate.
ARBITER_API_THROTTLE_RATE = env_rate("ARBITER_API_THROTTLE_RATE", None if _TESTS else "1200/min")
# Claim, vote, skip and undo: a person votes every few seconds at most; a scripted annotator
# voting in one round trip (docs/api.md) may go far faster and is held here.
ARBITER_API_THROTTLE_ANNOTATE_RATE = env_rate(
    "ARBITER_API_THROTTLE_ANNOTATE_RATE", None if _TESTS else "100/s"
)
# Where the counts live: Redis shared by every web process when set, else each process's
# memory (each gunicorn worker then counts on its own).
ARBITER_API_THROTTLE_REDIS_URL = env_str("ARBITER_API_THROTTLE_REDIS_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": ARBITER_API_THROTTLE_REDIS_URL,
        }
        if ARBITER_API_THROTTLE_REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"}
    ),
}
