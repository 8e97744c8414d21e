"""Limits on uploaded media (docs/operations.md, "Limits" and "Bounded media work"), read by
config/settings.py: sizes and counts checked from a file's header first, and the limits of
the bounded child processes that parse, probe, transcode and render every uploaded file."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int

ARBITER_MAX_IMAGE_BYTES = env_int("ARBITER_MAX_IMAGE_BYTES", 50 * 1024 * 1024)
# 40 Mpx keeps the rebuild of the largest image allowed (decoded frames and their PNG) under
# 500 MB (docs/operations.md, "Bounded media work").
ARBITER_MAX_IMAGE_PIXELS = env_int("ARBITER_MAX_IMAGE_PIXELS", 40_000_000)
# An animation's frames: at most this many, and all their pixels within the pixel limit.
ARBITER_MAX_IMAGE_FRAMES = env_int("ARBITER_MAX_IMAGE_FRAMES", 1000)
# Video, audio and 3D limits (docs/operations.md, "Limits"); checked from the header first.
ARBITER_MAX_VIDEO_BYTES = env_int("ARBITER_MAX_VIDEO_BYTES", 1024 * 1024 * 1024)
ARBITER_MAX_AUDIO_BYTES = env_int("ARBITER_MAX_AUDIO_BYTES", 200 * 1024 * 1024)
ARBITER_MAX_MODEL3D_BYTES = env_int("ARBITER_MAX_MODEL3D_BYTES", 200 * 1024 * 1024)
# A model with more triangles is refused: its views are rendered at import (docs/import-format.md).
ARBITER_MAX_MODEL3D_TRIANGLES = env_int("ARBITER_MAX_MODEL3D_TRIANGLES", 1_000_000)
ARBITER_MAX_MEDIA_SECONDS = env_int("ARBITER_MAX_MEDIA_SECONDS", 600)
# 1920 x 1080 (or 1080 x 1920): x264 keeps its look-ahead at full size, and a 4K clip needs
# about 1 GB to re-encode; raise it with ARBITER_MEDIA_MEMORY_BYTES_VIDEO (docs/import-format.md).
ARBITER_MAX_VIDEO_PIXELS = env_int("ARBITER_MAX_VIDEO_PIXELS", 1920 * 1080)
ARBITER_MAX_VIDEO_FRAME_RATE = env_int("ARBITER_MAX_VIDEO_FRAME_RATE", 240)
ARBITER_MAX_AUDIO_SAMPLE_RATE = env_int("ARBITER_MAX_AUDIO_SAMPLE_RATE", 192_000)
# Threads of each FFmpeg decoder and encoder of an import: fixed, so that a memory limit on the
# process that decodes means what it says.
ARBITER_MEDIA_THREADS = env_int("ARBITER_MEDIA_THREADS", 1)
# Every parse, probe, transcode and render of an uploaded file runs in a child process with
# these limits per kind of file (docs/operations.md, "Bounded media work"): memory is address
# space beyond the media server's own, CPU and wall time are seconds per file. Off
# (ARBITER_MEDIA_LIMITS=false, for the benchmark) runs the same children without rlimits.
_MEDIA_KINDS = ("image", "video", "audio", "model3d")
_MEDIA_MEMORY = {"image": 400, "video": 400, "audio": 400, "model3d": 400}
_MEDIA_CPU = {"image": 30, "video": 600, "audio": 120, "model3d": 45}
_MEDIA_WALL = {"image": 60, "video": 900, "audio": 180, "model3d": 55}
ARBITER_MEDIA_MEMORY_BYTES = {
    kind: env_int(f"ARBITER_MEDIA_MEMORY_BYTES_{kind.upper()}", _MEDIA_MEMORY[kind] * 1_000_000)
    for kind in _MEDIA_KINDS
}
ARBITER_MEDIA_CPU_SECONDS = {
    kind: env_int(f"ARBITER_MEDIA_CPU_SECONDS_{kind.upper()}", _MEDIA_CPU[kind])
    for kind in _MEDIA_KINDS
}
ARBITER_MEDIA_WALL_SECONDS = {
    kind: env_int(f"ARBITER_MEDIA_WALL_SECONDS_{kind.upper()}", _MEDIA_WALL[kind])
    for kind in _MEDIA_KINDS
}
ARBITER_MEDIA_LIMITS = env_bool("ARBITER_MEDIA_LIMITS", True)
# Media children at once in each process that imports (one per core: each is one thread).
ARBITER_MEDIA_WORKERS = env_int("ARBITER_MEDIA_WORKERS", os.cpu_count() or 1)
for _kind in _MEDIA_KINDS:
    if ARBITER_MEDIA_WALL_SECONDS[_kind] < 1 or ARBITER_MEDIA_CPU_SECONDS[_kind] < 1:
        raise ImproperlyConfigured(
            f"ARBITER_MEDIA_CPU_SECONDS_{_kind.upper()} and ARBITER_MEDIA_WALL_SECONDS_"
            f"{_kind.upper()} must be at least 1"
        )
if ARBITER_MEDIA_WORKERS < 1:
    raise ImproperlyConfigured(f"ARBITER_MEDIA_WORKERS={ARBITER_MEDIA_WORKERS} must be at least 1")
