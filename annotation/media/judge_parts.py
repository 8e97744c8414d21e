"""Video and audio as a chat-completions judge receives them (docs/judges.md, "Video and
audio"): a video as frames sampled uniformly, each a JPEG data URL labelled with its
timestamp; an audio clip as an ``input_audio`` part (WAV or MP3, base64).

Frames are decoded with PyAV from the stored original, seeking to each sampled time rather
than decoding the whole file (short gaps are decoded through, which is cheaper than a seek).
Audio goes as the served copy (no metadata) when it is WAV or MP3 and small enough;
otherwise it is transcoded to 16-bit WAV, downmixed to mono at 16 kHz when the full-rate
WAV would exceed ``ARBITER_JUDGE_MAX_AUDIO_BYTES``, and refused with the reason past that.
A text-to-audio pair under an Omni-RewardBench preset goes as one clip made of both
(``audio_pair_input``), as that benchmark's released script sends it.
"""

from __future__ import annotations

import base64
import io
import itertools
import math
import wave
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from django.conf import settings
from PIL import Image

from annotation.core import storage
from annotation.media.judge_images import MediaUnavailable, judge_decode, media_file
from annotation.models import Media

# A gap between sampled times shorter than this is decoded through rather than sought.
_SEEK_GAP_S = 1.0
_FRAME_JPEG_QUALITY = 85
# What a transcoded clip falls back to when the full-rate WAV is too large.
_SMALL_RATE = 16_000
_WAV_HEADER_BYTES = 44
_SENT_AS_IS: dict[str, str] = {Media.Format.WAV: "wav", Media.Format.MP3: "mp3"}


@dataclass(frozen=True)
class SampledFrame:
    number: int  # 1-based
    count: int
    seconds: float  # from the start of the video
    data_url: str

    @property
    def label(self) -> str:
        return f"frame {self.number} of {self.count} at {self.seconds:.2f} s"


def sample_times(*, duration_s: float, frame_rate: float, count: int) -> list[float]:
    """``count`` times spread uniformly from the first frame to the last (fewer when the
    video has fewer frames), as frame start times: Omni-RewardBench's ``encode_video``
    picks ``linspace(0, frames - 1, count)`` frame indices the same way."""
    frames = max(1, round(duration_s * frame_rate)) if frame_rate > 0 else 1
    indices = sorted({int(i) for i in np.linspace(0, frames - 1, max(1, count))})
    return [index / frame_rate if frame_rate > 0 else 0.0 for index in indices]


def video_frames(media: Media, *, count: int, max_side: int) -> list[SampledFrame]:
    """``count`` frames of the video sampled uniformly, as JPEG data URLs whose longest side
    is at most ``max_side``; ``MediaUnavailable`` when the file is missing or undecodable."""
    images = sampled_images(media, count=count)
    return [
        SampledFrame(number, len(images), seconds, _jpeg_data_url(image, max_side))
        for number, (seconds, image) in enumerate(images, start=1)
    ]


def sampled_images(media: Media, *, count: int) -> list[tuple[float, Image.Image]]:
    """(seconds, image) of ``count`` frames sampled uniformly from the stored original,
    decoded in a bounded child."""
    with media_file(media) as path:
        return judge_decode(_sampled_images, media, path, count=count, kind=Media.Kind.VIDEO.value)


def _sampled_images(media: Media, path: Path, *, count: int) -> list[tuple[float, Image.Image]]:
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            stream.codec_context.thread_count = 1  # one per child: its memory limit counts
            duration = media.duration_seconds or _container_seconds(container)
            rate = media.frame_rate or float(stream.average_rate or 0)
            times = sample_times(duration_s=duration, frame_rate=rate, count=count)
            images = _frames_at(container, stream, times, half_frame=0.5 / rate if rate else 0)
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise MediaUnavailable(f"video {media.sha256[:12]} cannot be decoded ({exc})") from None
    if not images:
        raise MediaUnavailable(f"video {media.sha256[:12]} decodes to no frame")
    return images


def sampled_greys(media: Media, *, count: int, side: int) -> list[np.ndarray]:
    """The frames ``sampled_images`` samples, as grey ``side`` x ``side`` thumbnails, float32
    in [0, 1]."""
    return [
        np.asarray(image.convert("L").resize((side, side)), dtype=np.float32) / 255.0
        for _, image in sampled_images(media, count=count)
    ]


def _container_seconds(container) -> float:
    return container.duration / av.time_base if container.duration else 0.0


def _frames_at(container, stream, times: list[float], *, half_frame: float) -> list:
    """(seconds, PIL image) of the first frame at or after each of ``times`` (within half a
    frame), seeking to the key frame before a time unless it is just ahead."""
    start = float(stream.start_time * stream.time_base) if stream.start_time else 0.0
    found: list[tuple[float, Image.Image]] = []
    frames = None
    position = -math.inf
    last = None
    for target in times:
        if frames is None or target - position > _SEEK_GAP_S:
            offset = int((start + target) / stream.time_base) if stream.time_base else 0
            container.seek(offset, stream=stream, backward=True, any_frame=False)
            frames = container.decode(stream)
        chosen = None
        for frame in frames:
            if frame.time is None:
                continue
            seconds = float(frame.time) - start
            position, last = seconds, frame
            if seconds + half_frame >= target:
                chosen = frame
                break
        if chosen is None:  # past the end: the last frame decoded stands in
            if last is None:
                break
            chosen = last
        seconds = max(0.0, float(chosen.time) - start)
        if found and seconds <= found[-1][0]:
            continue  # a short video: the same frame twice says nothing more
        found.append((seconds, chosen.to_image()))
    return found


def _jpeg_data_url(image: Image.Image, max_side: int) -> str:
    image = image.convert("RGB")
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=_FRAME_JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def audio_input(media: Media) -> dict:
    """The clip as an ``input_audio`` value, ``{"data": base64, "format": "wav" | "mp3"}``;
    ``MediaUnavailable`` when it is missing, undecodable or too long for the limit."""
    limit = settings.ARBITER_JUDGE_MAX_AUDIO_BYTES
    fmt = _SENT_AS_IS.get(media.served_format or media.format)
    if fmt and media.served_sha256:
        served = media.served_relative_path
        try:
            if storage.size("media", served) <= limit:
                data = storage.read_bytes("media", served)
                return {"data": base64.b64encode(data).decode("ascii"), "format": fmt}
        except FileNotFoundError:
            pass  # made again from the original below
    with media_file(media) as path:
        data = _wav(media, path, limit=limit)
    return {"data": base64.b64encode(data).decode("ascii"), "format": "wav"}


# Omni-RewardBench's run_exp_t2a.py (merge_audio_files): both clips loaded as mono at 16 kHz,
# joined with one second of silence between them, written as 16-bit WAV.
PAIR_RATE = 16_000
PAIR_SILENCE_S = 1.0


def audio_pair_input(first: Media, second: Media) -> dict:
    """Both clips of a pair as ONE ``input_audio`` value: ``first`` (the clip shown first),
    one second of silence, then ``second``, as mono 16-bit WAV at 16 kHz with no tags.
    ``MediaUnavailable`` when either is missing, undecodable, or the whole would exceed
    ``ARBITER_JUDGE_MAX_AUDIO_BYTES``."""
    limit = settings.ARBITER_JUDGE_MAX_AUDIO_BYTES
    silence = np.zeros(round(PAIR_SILENCE_S * PAIR_RATE), dtype=np.int16)
    budget = (limit - _WAV_HEADER_BYTES) // 2 - len(silence)
    clips = []
    for media in (first, second):
        samples = _mono_samples(media, budget=budget, limit=limit)
        budget -= len(samples)
        clips.append(samples)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(PAIR_RATE)
        wav.writeframes(np.concatenate([clips[0], silence, clips[1]]).astype("<i2").tobytes())
    return {"data": base64.b64encode(out.getvalue()).decode("ascii"), "format": "wav"}


def _mono_samples(media: Media, *, budget: int, limit: int) -> np.ndarray:
    """The clip's samples as mono int16 at ``PAIR_RATE``, decoded in a bounded child;
    ``MediaUnavailable`` once they pass ``budget`` samples (what is left of the judges' byte
    ``limit``)."""
    with media_file(media) as path:
        return judge_decode(
            _mono_samples_decoded, media, path, budget=budget, limit=limit,
            kind=Media.Kind.AUDIO.value,
        )  # fmt: skip


def _mono_samples_decoded(media: Media, path: Path, *, budget: int, limit: int) -> np.ndarray:
    pieces: list[np.ndarray] = []
    count = 0
    try:
        with av.open(str(path)) as source:
            resampler = av.AudioResampler(format="s16", layout="mono", rate=PAIR_RATE)
            frames = source.decode(source.streams.audio[0])
            for frame in itertools.chain(frames, [None]):
                for piece in resampler.resample(frame):
                    samples = piece.to_ndarray().reshape(-1)
                    count += len(samples)
                    if count > budget:
                        raise MediaUnavailable(
                            "the two clips joined with a second of silence exceed the judges' "
                            f"limit of {limit:,} bytes as mono 16 kHz WAV "
                            "(ARBITER_JUDGE_MAX_AUDIO_BYTES)"
                        )
                    pieces.append(samples)
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise MediaUnavailable(f"audio {media.sha256[:12]} cannot be decoded ({exc})") from None
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int16)


def _wav(media: Media, path: Path, *, limit: int) -> bytes:
    """The clip transcoded to 16-bit PCM WAV, at its own rate and channels when that fits
    ``limit``, else mono at 16 kHz; no tags. Decoded in a bounded child."""
    return judge_decode(_wav_decoded, media, path, limit=limit, kind=Media.Kind.AUDIO.value)


def _wav_decoded(media: Media, path: Path, *, limit: int) -> bytes:
    rate = media.sample_rate or _SMALL_RATE
    channels = min(2, media.channels or 1)
    seconds = media.duration_seconds or 0.0
    if _wav_bytes(seconds, rate, channels) > limit:
        rate, channels = min(rate, _SMALL_RATE), 1
        if _wav_bytes(seconds, rate, channels) > limit:
            raise MediaUnavailable(
                f"audio {media.sha256[:12]} is {seconds:.0f} s long: even as mono 16 kHz WAV it "
                f"exceeds the judges' limit of {limit:,} bytes (ARBITER_JUDGE_MAX_AUDIO_BYTES)"
            )
    layout = "stereo" if channels == 2 else "mono"
    out = io.BytesIO()
    try:
        with av.open(str(path)) as source, av.open(out, "w", format="wav") as wav:
            wav.metadata.clear()
            stream = wav.add_stream("pcm_s16le", rate=rate, layout=layout)
            resampler = av.AudioResampler(format="s16", layout=layout, rate=rate)
            for frame in source.decode(source.streams.audio[0]):
                for piece in resampler.resample(frame):
                    for packet in stream.encode(piece):
                        wav.mux(packet)
                if out.tell() > limit:
                    raise MediaUnavailable(
                        f"audio {media.sha256[:12]} exceeds the judges' limit of {limit:,} "
                        "bytes as WAV (ARBITER_JUDGE_MAX_AUDIO_BYTES)"
                    )
            for piece in resampler.resample(None):
                for packet in stream.encode(piece):
                    wav.mux(packet)
            for packet in stream.encode(None):
                wav.mux(packet)
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise MediaUnavailable(f"audio {media.sha256[:12]} cannot be decoded ({exc})") from None
    return out.getvalue()


def _wav_bytes(seconds: float, rate: int, channels: int) -> int:
    return _WAV_HEADER_BYTES + math.ceil(seconds * rate) * channels * 2
