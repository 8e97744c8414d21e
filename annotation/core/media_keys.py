"""The names media go by in what an annotator receives: opaque ids, never a content hash.

A media URL naming the file's sha256 could be looked up against the public benchmark files,
and so tell the annotator which model made a response. Instead it names ``media_url_key``,
an HMAC of the original's sha256 under a key derived from ``SECRET_KEY`` for this purpose
alone: stable (a browser caches it), one per stored file (``Media.url_key``, unique), and
meaningless to anyone without the secret. It is computed, not looked up, wherever a URL is
built; the media view finds the file by the stored column. The ETag is an HMAC of the hash of
the bytes sent, under another purpose, so that it changes with them and names nothing either.
The id is made from the original's hash rather than the served copy's: several originals can
share one served copy (the same pixels with different metadata) yet each needs a URL of its
own when a project serves the originals, and a URL must exist before its copy does (a video
waiting for its transcode).
After ``SECRET_KEY`` changes, ``manage.py media_url_keys`` stores the new ids
(docs/operations.md, "Media URLs")."""

from __future__ import annotations

import re

from django.urls import reverse
from django.utils.crypto import salted_hmac

# 128 bits: no two stored files share one in practice; the column is unique all the same.
URL_KEY_LENGTH = 32
URL_KEY = re.compile(rf"[0-9a-f]{{{URL_KEY_LENGTH}}}")
_URL_KEY_PURPOSE = "arbiter.media.url-key"
_ETAG_PURPOSE = "arbiter.media.etag"


def media_url_key(sha256: str) -> str:
    """The opaque id of the media whose original has this sha256 (``Media.url_key``)."""
    return salted_hmac(_URL_KEY_PURPOSE, sha256, algorithm="sha256").hexdigest()[:URL_KEY_LENGTH]


def media_etag(sha256: str) -> str:
    """The ETag value of the bytes with this sha256, as the media view sends them."""
    return salted_hmac(_ETAG_PURPOSE, sha256, algorithm="sha256").hexdigest()[:URL_KEY_LENGTH]


def media_path(*, slug: str, sha256: str) -> str:
    """The path of the media view for the media with this sha256 in project ``slug``."""
    return reverse("media", args=[slug, media_url_key(sha256)])
