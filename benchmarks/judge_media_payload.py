"""How long an openai judge takes to build what it sends for video and audio
(docs/judges.md, "Video and audio"): frames sampled uniformly from a video (seeking) against
decoding every frame, and an audio clip transcoded to WAV.

Writes the media with PyAV into a temporary folder (nothing downloaded) and prints seconds
per video and per clip:

    python benchmarks/judge_media_payload.py --seconds 5 --height 480 --frames 8 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def setup_django(media_root: Path) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    os.environ["ARBITER_MEDIA_ROOT"] = str(media_root)
    import django

    django.setup()


def write_video(path: Path, *, seconds: int, height: int, rate: int = 30) -> None:
    """Moving noise bars, H.264, a key frame every 2 s (a typical generated clip)."""
    width = height * 16 // 9 // 2 * 2
    rng = np.random.default_rng(0)
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=rate, options={"g": str(2 * rate)})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        base = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        for index in range(seconds * rate):
            pixels = np.roll(base, index * 4, axis=1)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def write_flac(path: Path, *, seconds: int, rate: int = 44100) -> None:
    t = np.arange(seconds * rate) / rate
    samples = (0.4 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)
    with av.open(str(path), "w", format="flac") as container:
        stream = container.add_stream("flac", rate=rate, layout="stereo")
        for start in range(0, len(samples), 4096):
            piece = samples[start : start + 4096]
            frame = av.AudioFrame.from_ndarray(
                np.repeat(piece[None, :], 2, axis=0).T.reshape(1, -1).copy(),
                format="s16",
                layout="stereo",
            )
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def stored(path: Path, media_root: Path, *, kind: str, fmt: str):
    """An unsaved Media row for ``path``, copied where the media store keeps originals."""
    from annotation.media.av_media import av_inspect
    from annotation.models import Media

    info = av_inspect(path, kind=kind)
    media = Media(
        sha256=info.sha256, kind=kind, format=fmt, width=info.width, height=info.height,
        size_bytes=info.size_bytes, duration_seconds=info.duration_seconds,
        frame_rate=info.frame_rate, sample_rate=info.sample_rate, channels=info.channels,
    )  # fmt: skip
    target = media_root / media.relative_path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(path.read_bytes())
    return media


def best_of(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--audio-seconds", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        setup_django(root / "media")
        from annotation.media.judge_parts import _wav, video_frames

        video = root / "clip.mp4"
        write_video(video, seconds=args.seconds, height=args.height)
        media = stored(video, root / "media", kind="video", fmt="MP4")
        sampled = best_of(
            args.repeat, lambda: video_frames(media, count=args.frames, max_side=args.side)
        )

        def decode_all() -> None:
            with av.open(str(video)) as container:
                for _ in container.decode(video=0):
                    pass

        full = best_of(args.repeat, decode_all)
        print(
            f"video {args.seconds} s at {media.width}x{media.height}, {media.frame_rate:g} fps: "
            f"{args.frames} frames sampled and encoded in {sampled * 1000:.0f} ms "
            f"(decoding every frame alone: {full * 1000:.0f} ms)"
        )

        clip = root / "clip.flac"
        write_flac(clip, seconds=args.audio_seconds)
        audio = stored(clip, root / "media", kind="audio", fmt="FLAC")
        limit = 20 * 1024 * 1024
        wav_bytes: list[int] = []
        transcoded = best_of(
            args.repeat, lambda: wav_bytes.append(len(_wav(audio, clip, limit=limit)))
        )
        print(
            f"audio {args.audio_seconds} s FLAC, 44.1 kHz stereo: WAV of {wav_bytes[-1]:,} bytes "
            f"in {transcoded * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
