"""What the web side needs of the reward model, without torch: what a model scores
(``ScoringInput``), the error a checkpoint that cannot be used raises, where checkpoints may
lie, and a local file of a stored one (``checkpoint_local``: with ARBITER_STORAGE=s3 a
download from the bucket's ``checkpoints`` area). The model and its checkpoints' reading and
writing (``judges.reward_model.model``) load torch, which only the workers that train or run
a reward-model judge import."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from annotation.core import storage
from judges.backends.media_stats import AudioStats, VideoStats
from judges.core.images import ImageStats

AREA = "checkpoints"


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


def checkpoint_name(path: str | Path) -> str:
    """The checkpoint's name in the ``checkpoints`` storage area: its path under
    ARBITER_CHECKPOINT_ROOT (``CheckpointError`` for one outside it)."""
    from django.conf import settings

    root = Path(settings.ARBITER_CHECKPOINT_ROOT).resolve()
    return checkpoint_path(path).relative_to(root).as_posix()


@contextmanager
def checkpoint_local(path: str | Path) -> Iterator[Path]:
    """A local file of the checkpoint ``path`` for the length of the ``with``: the file itself
    on local disk; with ARBITER_STORAGE=s3 a download into a temporary folder, removed
    afterwards. ``CheckpointError`` when it lies outside the root or is not stored."""
    if not storage.is_s3():
        yield checkpoint_path(path)
        return
    try:
        with storage.local_copy(AREA, checkpoint_name(path)) as local:
            yield local
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file") from None
