"""The playable copy of a video or audio file that a browser cannot play (an AVI, MPEG-4 Part 2
or Motion JPEG in Matroska, WMA, ...): re-encoded with PyAV into H.264 and AAC in MP4 (video)
or AAC in M4A (audio), with no metadata, read back and checked as every imported file is
(``av_inspect``), and its duration compared with the original's. The original is kept for
releases; this copy is the one served (docs/import-format.md, "Transcoded copies").

Which files are transcoded is decided at import (``av_media``), from an allowlist of
containers and codecs FFmpeg decodes; anything else is still refused there.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av

from annotation.media.av_media import AvInfo, AvMediaError, av_inspect, av_reason
from annotation.models import Media

# H.264 nearly indistinguishable from the source, at a speed a worker keeps up with.
_X264_OPTIONS = {"preset": "veryfast", "crf": "18"}
_AAC_RATES = {96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000}
_AAC_BIT_RATE = 160_000
_MUXER_OPTIONS = {"movflags": "+faststart"}

ProgressFn = Callable[[float], None]
"""Called with the share of the file done, 0..1, as the frames are encoded."""


def av_transcode(
    source: Path, dest: Path, *, kind: str, progress: ProgressFn | None = None
) -> AvInfo:
    """Writes to ``dest`` the playable copy of ``source`` (a ``kind`` "video" or "audio" file
    accepted at import); returns what ``av_inspect`` finds in it. Raises ``AvMediaError``
    naming the reason when it cannot be made, or when the copy does not play as long as the
    original (within one frame)."""
    original = av_inspect(source, kind=kind)
    if not original.transcode:
        raise AvMediaError("a browser plays this file already: it is served without transcoding")
    try:
        _encode(source, dest, kind=kind, duration=original.duration_seconds, progress=progress)
    except av.FFmpegError as exc:
        raise AvMediaError(f"cannot be transcoded: {av_reason(exc)}") from None
    copy = av_inspect(dest, kind=kind)
    if copy.transcode:
        raise AvMediaError("its transcoded copy is not playable in a browser")
    tolerance = _one_frame(original)
    if abs((copy.duration_seconds or 0.0) - (original.duration_seconds or 0.0)) > tolerance:
        raise AvMediaError(
            f"its transcoded copy lasts {copy.duration_seconds} s, the original "
            f"{original.duration_seconds} s"
        )
    if progress is not None:
        progress(1.0)
    return copy


def _one_frame(info: AvInfo) -> float:
    if info.kind == Media.Kind.VIDEO and info.frame_rate:
        return 1.0 / info.frame_rate
    # An AAC frame (1,024 samples) and its encoder delay.
    return 2048 / (info.sample_rate or 8000)


def _encode(
    source: Path, dest: Path, *, kind: str, duration: float | None, progress: ProgressFn | None
) -> None:
    with av.open(str(source), mode="r") as original:
        video_in = original.streams.video[0] if kind == Media.Kind.VIDEO else None
        audio_in = original.streams.audio[0] if original.streams.audio else None
        with av.open(str(dest), mode="w", format="mp4", options=_MUXER_OPTIONS) as copy:
            copy.metadata.clear()
            video_out = _video_stream(copy, video_in) if video_in is not None else None
            audio_out = _audio_stream(copy, audio_in) if audio_in is not None else None
            inputs = [stream for stream in (video_in, audio_in) if stream is not None]
            for stream in inputs:
                stream.codec_context.thread_type = "AUTO"
            timing = _VideoTiming(video_in) if video_in is not None else None
            samples = _AudioTiming(audio_out) if audio_out is not None else None
            for packet in original.demux(inputs):
                for frame in packet.decode():
                    if isinstance(frame, av.VideoFrame) and video_out is not None and timing:
                        _mux(copy, video_out, _video_frame(frame, video_out, timing))
                    elif isinstance(frame, av.AudioFrame) and audio_out is not None and samples:
                        for piece in samples.frames(frame):
                            _mux(copy, audio_out, piece)
                    else:
                        continue
                    if progress is not None and duration and frame.time is not None:
                        progress(min(0.99, max(0.0, float(frame.time) / duration)))
            if audio_out is not None and samples:
                for piece in samples.frames(None):
                    _mux(copy, audio_out, piece)
            for output in (video_out, audio_out):
                if output is not None:
                    _mux(copy, output, None)


def _video_stream(copy, source):
    rate = source.average_rate or source.guessed_rate or Fraction(25)
    stream = copy.add_stream("libx264", rate=rate, options=_X264_OPTIONS)
    context = source.codec_context
    # 4:2:0 chroma needs even sides: an odd one loses its last row or column.
    stream.width = max(2, context.width - context.width % 2)
    stream.height = max(2, context.height - context.height % 2)
    stream.pix_fmt = "yuv420p"
    stream.time_base = source.time_base or Fraction(1, round(rate) or 25)
    stream.codec_context.time_base = stream.time_base
    stream.metadata.clear()
    return stream


def _audio_stream(copy, source):
    context = source.codec_context
    rate = context.sample_rate if context.sample_rate in _AAC_RATES else 48000
    layout = "mono" if (context.channels or 1) == 1 else "stereo"
    stream = copy.add_stream("aac", rate=rate, layout=layout)
    stream.bit_rate = _AAC_BIT_RATE
    stream.metadata.clear()
    return stream


class _VideoTiming:
    """Each frame's time in the copy: its own when it has one (in the source's time base,
    which the copy keeps), else one frame after the last; always increasing."""

    def __init__(self, source):
        rate = source.average_rate or source.guessed_rate or Fraction(25)
        base = source.time_base or Fraction(1, 25)
        self.step = max(1, round(1 / (rate * base)))
        self.last: int | None = None

    def next(self, pts: int | None) -> int:
        if pts is None:
            pts = 0 if self.last is None else self.last + self.step
        if self.last is not None and pts <= self.last:
            pts = self.last + 1
        self.last = pts
        return pts


class _AudioTiming:
    """Decoded audio resampled to what the encoder takes, timed by the samples written,
    from the source's first timestamp on."""

    def __init__(self, stream):
        context = stream.codec_context
        self.rate = context.sample_rate
        self.resampler = av.AudioResampler(format="fltp", layout=context.layout, rate=self.rate)
        self.written: int | None = None

    def frames(self, frame):
        """The encoder's frames for a decoded ``frame``; None for what the resampler holds."""
        if self.written is None:
            self.written = max(0, round(float(frame.time or 0.0) * self.rate)) if frame else 0
        for piece in self.resampler.resample(frame):
            piece.pts, piece.time_base = self.written, Fraction(1, self.rate)
            self.written += piece.samples
            yield piece


def _video_frame(frame, stream, timing: _VideoTiming):
    pts = timing.next(frame.pts)
    out = frame.reformat(width=stream.width, height=stream.height, format="yuv420p")
    out.pts, out.time_base = pts, stream.time_base
    return out


def _mux(copy, stream, frame) -> None:
    for packet in stream.encode(frame):
        copy.mux(packet)
