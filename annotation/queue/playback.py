"""How long a pair's responses take to play: the project option "play each response to the end
before voting" (``Project.play_to_end``) refuses a vote served more recently than that.

The comparison page plays every video and audio part of the two responses together, from one
clock (static/js/players.js), so the responses have been played to the end once the longest
of those parts has had time to play at normal speed. Parts without a known duration and the
prompt's own media count for nothing."""

from __future__ import annotations

from annotation.core.content import AUDIO, VIDEO
from annotation.models import Media, Pair

TIMED_PART_TYPES = (VIDEO, AUDIO)


def responses_play_seconds(*, pair: Pair) -> float:
    """Seconds of the longest video or audio part of the pair's two responses (0 without)."""
    hashes = {
        part["media"]
        for content in (pair.response_a.content, pair.response_b.content)
        for part in content
        if part["type"] in TIMED_PART_TYPES
    }
    if not hashes:
        return 0.0
    durations = Media.objects.filter(sha256__in=hashes).values_list("duration_seconds", flat=True)
    return max((seconds or 0.0 for seconds in durations), default=0.0)
