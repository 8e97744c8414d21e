"""Limits on what annotators and curators send, in one place: the pages' forms, the API's
serializers and the services all read these, so a value one accepts the others accept too."""

from __future__ import annotations

MAX_RATIONALE_CHARS = 5000
MAX_SKIP_NOTE_CHARS = 2000
MAX_FLAG_NOTE_CHARS = 2000
MAX_FLAG_REPLY_CHARS = 5000
MAX_ADJUDICATION_NOTE_CHARS = 5000
MAX_EXCLUSION_REASON_CHARS = 2000
# A vote's time on task above a day is a tab left open, not time spent judging.
MAX_TIME_ON_TASK_MS = 24 * 3600 * 1000
# Serving priority: higher first, 0 normal.
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
# Pair ids in one curator action.
MAX_PAIR_IDS = 10_000
# "Release leases older than N minutes": a week at most.
MAX_LEASE_AGE_MINUTES = 7 * 24 * 60
# How long an annotator's last vote or skip can be undone (annotation/queue/services/undo.py);
# the vote's refusal of a changed reason says so too.
UNDO_SECONDS = 60
