"""Cheap statistics of videos and audio clips for the reward model (docs/judges.md,
"reward_model"): what the import probed (duration, frame rate, size, sample rate, channels),
a video's mean frame-to-frame difference over a few frames sampled uniformly, and an audio
clip's loudness from its waveform peaks (no decoding). Importable without Django set up."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from annotation.models import Media

# Frames sampled for the frame difference, and the grey thumbnail they are compared at.
MOTION_FRAMES = 4
_MOTION_THUMB = 32
# A waveform peak below this (about -40 dBFS) counts as silence.
SILENCE_PEAK = 0.01


@dataclass(frozen=True)
class VideoStats:
    duration_s: float
    frame_rate: float
    pixels: int  # of one frame
    motion: float  # mean |difference| of consecutive sampled frames, 0..1

    def as_features(self) -> list[float]:
        return [
            math.log1p(self.duration_s) / 5.0,
            self.frame_rate / 60.0,
            math.log1p(self.pixels) / 16.0,
            self.motion,
        ]


@dataclass(frozen=True)
class AudioStats:
    duration_s: float
    sample_rate: int
    channels: int
    rms: float  # of the waveform peaks, 0..1
    peak: float  # the loudest peak, 0..1
    silence: float  # share of peaks below SILENCE_PEAK

    def as_features(self) -> list[float]:
        return [
            math.log1p(self.duration_s) / 5.0,
            self.sample_rate / 48_000,
            self.channels / 2.0,
            self.rms,
            self.peak,
            self.silence,
        ]


N_VIDEO_FEATURES = 4
N_AUDIO_FEATURES = 6
# Per kind: log count, unreadable share, then the mean statistics.
N_MEDIA_FEATURES = 2 + N_VIDEO_FEATURES + 2 + N_AUDIO_FEATURES


def media_hashes(content: list[dict], kind: str) -> list[str]:
    """The media hashes of a prompt's or response's parts of ``kind``, in order."""
    return [p["media"] for p in content if p.get("type") == kind]


def media_features(videos, audios) -> list[float]:
    """The reward model's media columns for one response's video and audio statistics (None:
    unreadable); zeros where it has none."""
    out: list[float] = []
    for stats, width in ((videos, N_VIDEO_FEATURES), (audios, N_AUDIO_FEATURES)):
        readable = [s.as_features() for s in stats if s is not None]
        out.append(math.log1p(len(stats)))
        out.append(1.0 - len(readable) / len(stats) if stats else 0.0)
        out.extend(np.mean(readable, axis=0).tolist() if readable else [0.0] * width)
    return out


def audio_stats(media: Media) -> AudioStats:
    """From the row alone: the import stored the duration, rate, channels and peaks."""
    peaks = np.asarray(media.peaks or [], dtype=np.float64)
    return AudioStats(
        duration_s=float(media.duration_seconds or 0.0),
        sample_rate=int(media.sample_rate or 0),
        channels=int(media.channels or 0),
        rms=float(np.sqrt(np.mean(peaks**2))) if peaks.size else 0.0,
        peak=float(peaks.max()) if peaks.size else 0.0,
        silence=float(np.mean(peaks < SILENCE_PEAK)) if peaks.size else 1.0,
    )


def video_stats(media: Media) -> VideoStats:
    """The probed figures and the motion over MOTION_FRAMES frames sampled uniformly;
    raises ``MediaUnavailable`` when the file cannot be decoded."""
    # here, so the reward model (which imports this module) loads without Django's settings
    from annotation.media.judge_parts import sampled_greys

    greys = sampled_greys(media, count=MOTION_FRAMES, side=_MOTION_THUMB)
    differences = [float(np.abs(b - a).mean()) for a, b in itertools.pairwise(greys)]
    return VideoStats(
        duration_s=float(media.duration_seconds or 0.0),
        frame_rate=float(media.frame_rate or 0.0),
        pixels=int(media.width * media.height),
        motion=float(np.mean(differences)) if differences else 0.0,
    )


def media_stats_cached(hashes, cache: dict) -> None:
    """Fills ``cache`` with the VideoStats or AudioStats of each video or audio hash not in
    it yet (None: the row or its bytes are missing or unreadable). Media never change."""
    from annotation.media.judge_images import MediaUnavailable  # as above: no Django at import
    from judges.core.images import media_rows

    wanted = {sha for sha in hashes if sha not in cache}
    rows = media_rows(wanted)
    for sha in wanted:
        media = rows.get(sha)
        try:
            if media is None:
                cache[sha] = None
            elif media.kind == "video":
                cache[sha] = video_stats(media)
            elif media.kind == "audio":
                cache[sha] = audio_stats(media)
            else:
                cache[sha] = None
        except MediaUnavailable:
            cache[sha] = None
