"""Named API tokens made on the account page (docs/api.md, "Authentication"): the key is
shown once and only its sha256 is kept; a token may expire and be revoked."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone

# The start of every named token's key: tells it apart from a command-line token (40 hex
# digits) before any lookup, and makes a leaked key easy to recognise.
NAMED_TOKEN_PREFIX = "arb_"
TOKEN_NAME_MAX_CHARS = 100


def key_digest(key: str) -> str:
    """What is stored of a named token's key: its sha256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=TOKEN_NAME_MAX_CHARS)
    # sha256 of the key, hex: the key itself is never stored.
    key_digest = models.CharField(max_length=64, unique=True)
    # The key's first characters, to recognise it in the list.
    key_start = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_start}...)"

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def active(self) -> bool:
        return self.revoked_at is None and not self.expired
