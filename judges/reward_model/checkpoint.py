"""What the web side needs of the reward model, without torch: what a model scores
(``ScoringInput``), the error a checkpoint that cannot be used raises, and where checkpoints
may lie. The model and its checkpoints' reading and writing (``judges.reward_model.model``)
load torch, which only the workers that train or run a reward-model judge import."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judges.backends.media_stats import AudioStats, VideoStats
from judges.core.images import ImageStats


class CheckpointError(ValueError):
    """A reward-model checkpoint that is missing, unreadable or not in Arbiter's format."""


@dataclass(frozen=True)
class ScoringInput:
    """One response to score: the texts and, per image, video and audio clip, its
    statistics (None: unreadable)."""

    prompt_text: str
    response_text: str
    images: tuple[ImageStats | None, ...] = ()
    criterion: str = ""
    videos: tuple[VideoStats | None, ...] = ()
    audios: tuple[AudioStats | None, ...] = ()


def checkpoint_path(path: str | Path) -> Path:
    """``path`` resolved (symlinks and ``..``; a relative path is taken from the root) when it
    lies under ARBITER_CHECKPOINT_ROOT; ``CheckpointError`` otherwise, with one message whether
    or not the file exists, so a judge's checkpoint cannot probe the server's files."""
    from django.conf import settings

    root = Path(settings.ARBITER_CHECKPOINT_ROOT).resolve()
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root):
        raise CheckpointError(f"Checkpoints must lie under ARBITER_CHECKPOINT_ROOT ({root})")
    return resolved
