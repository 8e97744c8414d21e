"""Storing every media file's opaque id again (``Media.url_key``): after ``SECRET_KEY``
changes, the ids that pages compute no longer match the stored ones, and every media URL would
answer 404 until they are stored anew (docs/operations.md, "Media URLs")."""

from __future__ import annotations

from django.db import transaction

from annotation.core.media_keys import media_url_key
from annotation.models import Media

_BATCH = 2000


@transaction.atomic
def media_url_keys_refresh() -> int:
    """Stores ``media_url_key`` of every media row whose stored id differs; returns how many.
    One transaction: every id changes at once."""
    stale = []
    rows = Media.objects.only("sha256", "url_key").order_by("pk")
    for media in rows.iterator(chunk_size=_BATCH):
        key = media_url_key(media.sha256)
        if media.url_key != key:
            media.url_key = key
            stale.append(media)
    Media.objects.bulk_update(stale, ["url_key"], batch_size=_BATCH)
    return len(stale)
