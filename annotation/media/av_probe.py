"""Video and audio probed and checked against the limits, with PyAV (FFmpeg's libraries):
the containers and codecs read, the formats an original is stored and served in, the limits
(docs/operations.md, "Limits") checked from the header (``av_probe``) and again while the
file is decoded (``DecodeBudget``), so a file whose header lies is stopped at the limit. The
decoding and re-encoding pass that uses them is ``annotation.media.av_media``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
from django.conf import settings

from annotation.models import Media

# What is decoded: containers and codecs FFmpeg reads well, nothing guessed from bytes (FFmpeg
# would open a text file as "tty" video), by FFmpeg's demuxer and codec names.
_MP4_FAMILY = "mov,mp4,m4a,3gp,3g2,mj2"
_MATROSKA = "matroska,webm"
_CONTAINERS = {
    _MP4_FAMILY, _MATROSKA, "avi", "mpeg", "mpegts", "flv", "asf", "ogg", "wav", "aiff", "mp3",
    "flac",
}  # fmt: skip
_VIDEO_CODECS = {
    "h264", "hevc", "vp8", "vp9", "av1", "mpeg4", "mjpeg", "mpeg1video", "mpeg2video", "h263",
    "msmpeg4v2", "msmpeg4v3", "wmv1", "wmv2", "theora", "flv1", "prores", "dnxhd",
}  # fmt: skip
_AUDIO_CODECS = {
    "mp3", "aac", "ac3", "eac3", "vorbis", "opus", "flac", "alac", "wmav1", "wmav2",
    "pcm_s16le", "pcm_s16be", "pcm_s24le", "pcm_s24be", "pcm_s32le", "pcm_f32le", "pcm_u8",
    "pcm_mulaw", "pcm_alaw", "adpcm_ima_wav", "adpcm_ms",
}  # fmt: skip
# The original's format (``Media.format``, the extension it is stored under) by its demuxer; a
# container with no format of its own in the app (AVI, MPEG-TS, ...) is stored as MP4 or M4A.
_VIDEO_ORIGINAL_FORMATS = {_MP4_FAMILY: Media.Format.MP4, _MATROSKA: Media.Format.WEBM}
_AUDIO_ORIGINAL_FORMATS = {
    "mp3": Media.Format.MP3,
    "wav": Media.Format.WAV,
    "ogg": Media.Format.OGG,
    "flac": Media.Format.FLAC,
    _MP4_FAMILY: Media.Format.M4A,
    _MATROSKA: Media.Format.WEBM,
}
# The one format each kind is served in.
SERVED_FORMATS: dict[str, str] = {
    Media.Kind.VIDEO: Media.Format.MP4,
    Media.Kind.AUDIO: Media.Format.M4A,
}

# The served frame rate is the source's average within these bounds (a slower source's frames
# are repeated; a faster one's dropped).
_MIN_SERVED_RATE, _MAX_SERVED_RATE = Fraction(1), Fraction(60)
HTML_STARTS = (b"<!doctype", b"<html", b"<?xml", b"<head", b"<body")
# Errors PyAV and numpy raise on a hostile stream (besides FFmpeg's own): a refusal, not a crash.
DECODE_ERRORS = (av.FFmpegError, ValueError, MemoryError, OverflowError, ZeroDivisionError)


class AvMediaError(Exception):
    """The file was refused; the message says why."""


@dataclass
class AvInfo:
    """What an import stores about one video or audio file (the original's properties)."""

    sha256: str
    kind: str
    format: str
    size_bytes: int
    container: str
    width: int = 0
    height: int = 0
    video_codec: str = ""
    audio_codec: str = ""
    duration_seconds: float | None = None
    frame_rate: float | None = None
    sample_rate: int | None = None
    channels: int | None = None
    peaks: list[float] | None = None
    # Integrated loudness (BS.1770 / EBU R 128) of an audio file; None for silence.
    loudness_lufs: float | None = None
    # The served copy's format (``SERVED_FORMATS``) and a video's frame rate in it.
    served_format: str = ""
    served_frame_rate: float | None = None
    # The first frame as served (rotated), as JPEG bytes (video), stored as an image Media.
    poster_jpeg: bytes | None = field(default=None, repr=False)


def av_limits() -> dict[str, int]:
    """The limits ``av_inspect`` applies, from the settings, for a caller in another process."""
    return {
        "seconds": settings.ARBITER_MAX_MEDIA_SECONDS,
        "pixels": settings.ARBITER_MAX_VIDEO_PIXELS,
        "frame_rate": settings.ARBITER_MAX_VIDEO_FRAME_RATE,
        "sample_rate": settings.ARBITER_MAX_AUDIO_SAMPLE_RATE,
        "threads": settings.ARBITER_MEDIA_THREADS,
        Media.Kind.VIDEO: settings.ARBITER_MAX_VIDEO_BYTES,
        Media.Kind.AUDIO: settings.ARBITER_MAX_AUDIO_BYTES,
    }


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def av_probe(container, *, kind: str, size: int, limits: dict[str, int]) -> AvInfo:
    demuxer = container.format.name
    if demuxer not in _CONTAINERS:
        raise AvMediaError(
            f"this container ({demuxer}) is not read: give MP4, WebM, Matroska, AVI, MPEG, "
            "MP3, WAV, Ogg, FLAC or M4A"
        )
    video = container.streams.video[0] if container.streams.video else None
    audio = container.streams.audio[0] if container.streams.audio else None
    if kind == Media.Kind.VIDEO and video is None:
        raise AvMediaError("no video stream in the file")
    if kind == Media.Kind.AUDIO and audio is None:
        raise AvMediaError("no audio stream in the file")
    if kind == Media.Kind.AUDIO:
        video = None  # cover art in an audio file is an attached picture: not served
    originals = _VIDEO_ORIGINAL_FORMATS if video is not None else _AUDIO_ORIGINAL_FORMATS
    info = AvInfo(
        sha256="",
        kind=kind,
        format=originals.get(demuxer, SERVED_FORMATS[kind]),
        size_bytes=size,
        container=demuxer,
        served_format=SERVED_FORMATS[kind],
    )
    if video is not None:
        context = video.codec_context
        info.video_codec = _codec_name(video)
        if info.video_codec not in _VIDEO_CODECS:
            raise AvMediaError(f"{info.video_codec} video is not read")
        info.width, info.height = int(context.width or 0), int(context.height or 0)
        if info.width <= 0 or info.height <= 0:
            raise AvMediaError("the video stream has no frame size")
        _check_pixels(info.width, info.height, limits, "the header claims")
        rate = video.average_rate or video.guessed_rate
        if not rate or rate <= 0:
            raise AvMediaError("the video stream has no frame rate")
        if rate > limits["frame_rate"]:
            raise AvMediaError(
                f"the header claims {float(rate):,.0f} frames a second, more than the limit "
                f"of {limits['frame_rate']:,}"
            )
        info.frame_rate = round(float(rate), 3)
        info.served_frame_rate = round(float(served_rate(rate)), 3)
    if audio is not None:
        info.audio_codec = _codec_name(audio)
        if info.audio_codec not in _AUDIO_CODECS:
            raise AvMediaError(f"{info.audio_codec} audio is not read")
        info.sample_rate = int(audio.codec_context.sample_rate or 0) or None
        info.channels = int(audio.codec_context.channels or 0) or None
        if info.sample_rate is None:
            raise AvMediaError("the audio stream has no sample rate")
        _check_sample_rate(info.sample_rate, limits)
    claimed = claimed_seconds(container, video or audio)
    if claimed is not None and claimed > limits["seconds"]:
        raise AvMediaError(
            f"the header claims a duration of {claimed:,.0f} s, longer than the limit of "
            f"{limits['seconds']:,} s"
        )
    return info


def _codec_name(stream) -> str:
    codec = stream.codec_context.codec if stream.codec_context is not None else None
    if codec is None:
        raise AvMediaError(f"its {stream.type} stream is in no codec FFmpeg knows")
    return codec.canonical_name


def served_rate(rate) -> Fraction:
    """The served copy's constant frame rate for a source whose average rate is ``rate``."""
    rate = Fraction(rate).limit_denominator(1001)
    return min(max(rate, _MIN_SERVED_RATE), _MAX_SERVED_RATE)


def _check_pixels(width: int, height: int, limits: dict[str, int], who: str) -> None:
    if width * height > limits["pixels"]:
        raise AvMediaError(
            f"{who} {width:,}x{height:,} pixels a frame, more than the limit of "
            f"{limits['pixels']:,}"
        )


def _check_sample_rate(rate: int, limits: dict[str, int]) -> None:
    if rate > limits["sample_rate"]:
        raise AvMediaError(
            f"a sample rate of {rate:,} Hz, more than the limit of {limits['sample_rate']:,} Hz"
        )


def claimed_seconds(container, stream) -> float | None:
    candidates = []
    if container.duration is not None and container.duration > 0:
        candidates.append(container.duration / av.time_base)
    if stream is not None and stream.duration and stream.time_base:
        candidates.append(float(stream.duration * stream.time_base))
    return max(candidates) if candidates else None


class DecodeBudget:
    """What decoding may produce: frames up to the limits' duration at the limits' frame rate,
    samples up to that duration at the limits' sample rate, each frame within the pixel and
    sample-rate limits, and no timestamp past the duration limit."""

    def __init__(self, limits: dict[str, int]):
        self.limits = limits
        self.seconds = limits["seconds"]
        self.frames_left = self.seconds * limits["frame_rate"] + 1
        self.samples_left = self.seconds * limits["sample_rate"]
        self.end = 0.0

    def video(self, frame) -> None:
        self.frames_left -= 1
        if self.frames_left < 0:
            raise AvMediaError(
                f"more frames than {self.seconds:,} s at {self.limits['frame_rate']:,} a second"
            )
        _check_pixels(frame.width, frame.height, self.limits, "a frame has")
        self._time(frame)

    def audio(self, frame) -> None:
        _check_sample_rate(frame.sample_rate, self.limits)
        self.samples_left -= frame.samples
        if self.samples_left < 0:
            raise AvMediaError(f"more samples than {self.seconds:,} s of audio")
        self._time(frame)

    def _time(self, frame) -> None:
        time = frame.time  # PyAV computes it with fractions each time it is asked
        if time is not None:
            self.end = max(self.end, float(time))
            if self.end > self.seconds:
                raise AvMediaError(f"longer than the limit of {self.seconds:,} s")


def av_reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, av.FFmpegError) and exc.strerror:
        text = exc.strerror
    return text[:200]
