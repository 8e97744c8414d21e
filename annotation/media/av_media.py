"""Video and audio for an import, with PyAV (FFmpeg's libraries): probed once, decoded in full
to prove they play, and remuxed without re-encoding into the copy the app serves, which
carries no metadata (container and stream tags such as title, comment, encoder or artist, ID3
and WAV INFO tags, chapters, attachments, data and subtitle streams).

The packets of the served copy are the original's, byte for byte: the copy is read back and
its packets compared, so its frames and samples are the original's. A poster frame (video)
and waveform peaks (audio) are made in the same decoding pass. Files are read from disk in
packets, never whole. What a browser plays (MP4 or WebM video; MP4/M4A, MP3, WAV, Ogg, FLAC
or WebM audio) is served as that copy; a file in another container or codec that FFmpeg
decodes (``_TRANSCODED_*``: AVI, MPEG-4 Part 2 or Motion JPEG in Matroska, WMA, ...) is
accepted with ``transcode`` set and gets a playable copy later (``annotation.media.transcode``);
anything else is refused with the reason. Limits: docs/operations.md ("Limits").
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np
from django.conf import settings

from annotation.media.loudness import FrameLoudness
from annotation.models import Media

# Number of maxima kept for an audio track's waveform, and decimals kept of each.
WAVEFORM_PEAKS = 200
_PEAK_DECIMALS = 3
# Audio is summarised in blocks of this many seconds while decoding, then reduced to
# WAVEFORM_PEAKS: memory stays small whatever the length.
_PEAK_BLOCK_SECONDS = 0.01
_POSTER_QUALITY = 90

# What a browser plays, by FFmpeg's demuxer name and codec names.
_MP4_FAMILY = "mov,mp4,m4a,3gp,3g2,mj2"
_MATROSKA = "matroska,webm"
_VIDEO_CODECS = {
    Media.Format.MP4: {"h264", "av1", "vp9", "hevc"},
    Media.Format.WEBM: {"vp8", "vp9", "av1"},
}
_AUDIO_CODECS_WITH_VIDEO = {
    Media.Format.MP4: {"aac", "mp3", "opus", "flac"},
    Media.Format.WEBM: {"opus", "vorbis"},
}
_AUDIO_FORMATS = {
    # demuxer name: (format, codecs)
    "mp3": (Media.Format.MP3, {"mp3"}),
    "wav": (Media.Format.WAV, {"pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_u8"}),
    "ogg": (Media.Format.OGG, {"vorbis", "opus", "flac"}),
    "flac": (Media.Format.FLAC, {"flac"}),
    _MP4_FAMILY: (Media.Format.M4A, {"aac", "mp3", "opus", "flac", "alac"}),
    _MATROSKA: (Media.Format.WEBM, {"opus", "vorbis"}),
}
# The muxer that writes each served format.
_MUXERS: dict[str, str] = {
    Media.Format.MP4: "mp4",
    Media.Format.M4A: "mp4",
    Media.Format.WEBM: "webm",
    Media.Format.MP3: "mp3",
    Media.Format.WAV: "wav",
    Media.Format.OGG: "ogg",
    Media.Format.FLAC: "flac",
}
# Muxer options that keep the muxer from writing tags of its own (encoder, ID3, INFO) and put
# an MP4's index first, so a browser starts playing before the whole file has arrived.
_MUXER_OPTIONS = {
    "mp4": {"movflags": "+faststart"},
    "mp3": {"id3v2_version": "0", "write_id3v1": "0"},
    "wav": {"write_bext": "0"},
    "flac": {"write_header": "1"},
}
# What is decoded and re-encoded into a playable copy when a browser cannot play the file as
# it is: containers and codecs FFmpeg reads well, nothing guessed from bytes (FFmpeg would
# open a text file as "tty" video).
_TRANSCODED_CONTAINERS = {
    "avi", _MATROSKA, _MP4_FAMILY, "mpeg", "mpegts", "flv", "asf", "ogg", "wav", "aiff",
}  # fmt: skip
_TRANSCODED_VIDEO_CODECS = {
    "mpeg4", "mjpeg", "mpeg1video", "mpeg2video", "h263", "msmpeg4v2", "msmpeg4v3", "wmv1",
    "wmv2", "theora", "flv1", "prores", "dnxhd", "h264", "hevc", "vp8", "vp9", "av1",
}  # fmt: skip
_TRANSCODED_AUDIO_CODECS = {
    "mp3", "aac", "ac3", "eac3", "vorbis", "opus", "flac", "alac", "wmav1", "wmav2",
    "pcm_s16le", "pcm_s16be", "pcm_s24le", "pcm_s24be", "pcm_s32le", "pcm_f32le", "pcm_u8",
    "pcm_mulaw", "pcm_alaw", "adpcm_ima_wav", "adpcm_ms",
}  # fmt: skip
# The format of a transcoded copy: H.264 and AAC in MP4, or AAC alone in M4A.
TRANSCODED_FORMATS: dict[str, str] = {
    Media.Kind.VIDEO: Media.Format.MP4,
    Media.Kind.AUDIO: Media.Format.M4A,
}
# The copy read back is in a format this module wrote, its streams declared in its header:
# no need to read 5 MB of it to find them (which costs a WAV 25 ms).
_READ_BACK_OPTIONS = {"probesize": "65536", "analyzeduration": "1"}
_HTML_STARTS = (b"<!doctype", b"<html", b"<?xml", b"<head", b"<body")


class AvMediaError(Exception):
    """The file was refused; the message says why."""


class _NotPlayable(AvMediaError):
    """A browser cannot play the file as it is; it may be transcoded."""


@dataclass
class AvInfo:
    """What an import stores about one video or audio file."""

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
    # A browser cannot play it as it is: ``format`` is that of the copy still to be made.
    transcode: bool = False
    # The first frame as JPEG bytes (video), stored as an image Media.
    poster_jpeg: bytes | None = field(default=None, repr=False)


def av_limits() -> dict[str, int]:
    return {
        "seconds": settings.ARBITER_MAX_MEDIA_SECONDS,
        "pixels": settings.ARBITER_MAX_VIDEO_PIXELS,
        Media.Kind.VIDEO: settings.ARBITER_MAX_VIDEO_BYTES,
        Media.Kind.AUDIO: settings.ARBITER_MAX_AUDIO_BYTES,
    }


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def av_inspect(
    path: Path,
    *,
    kind: str,
    limits: dict[str, int] | None = None,
    strip_to: Path | None = None,
) -> AvInfo:
    """Probes and fully decodes the file at ``path`` as a ``kind`` ("video" or "audio");
    raises ``AvMediaError`` naming the reason it cannot be accepted. ``limits``: those of
    ``av_limits()``, passed by a caller in another process. With ``strip_to``, the served
    copy is written there in the same pass, unless the file is to be transcoded: each
    packet is remuxed, unchanged, into the same format with no metadata, chapters,
    attachments or other streams as it is decoded; the copy is then read back, and
    ``AvMediaError`` raised unless its packets are the original's."""
    limits = limits or av_limits()
    size = path.stat().st_size
    if size == 0:
        raise AvMediaError("the file is empty")
    if size > limits[kind]:
        raise AvMediaError(f"the {kind} is larger than {limits[kind]:,} bytes")
    with open(path, "rb") as handle:
        head = handle.read(512).lstrip().lower()
    if head.startswith(_HTML_STARTS):
        raise AvMediaError(f"not a {kind} file: it is an HTML or XML page")
    try:
        container = av.open(str(path), mode="r")
    except (av.FFmpegError, UnicodeDecodeError, ValueError) as exc:
        raise AvMediaError(
            f"cannot be read as {kind} (corrupt, truncated or another kind of file): "
            f"{av_reason(exc)}"
        ) from None
    remux = None
    try:
        with container:
            info = _probe(container, kind=kind, size=size, limits=limits)
            if strip_to is not None and not info.transcode:
                remux = _Remux(strip_to, info, _served_streams(container, info))
            _decode(container, info, limits=limits, remux=remux)
            if remux is not None:
                remux.close()
        if remux is not None:
            remux.check()
    except BaseException:
        if remux is not None:
            remux.discard()
        raise
    info.sha256 = file_sha256(path)
    return info


def _probe(container, *, kind: str, size: int, limits: dict[str, int]) -> AvInfo:
    demuxer = container.format.name
    video = container.streams.video[0] if container.streams.video else None
    audio = container.streams.audio[0] if container.streams.audio else None
    if kind == Media.Kind.VIDEO and video is None:
        raise AvMediaError("no video stream in the file")
    if kind == Media.Kind.AUDIO and audio is None:
        raise AvMediaError("no audio stream in the file")
    if kind == Media.Kind.AUDIO:
        video = None  # cover art in an audio file is an attached picture: not served
    info = AvInfo(sha256="", kind=kind, format="", size_bytes=size, container=demuxer)
    if video is not None:
        context = video.codec_context
        info.width, info.height = int(context.width or 0), int(context.height or 0)
        if info.width <= 0 or info.height <= 0:
            raise AvMediaError("the video stream has no frame size")
        if info.width * info.height > limits["pixels"]:
            raise AvMediaError(
                f"the header claims {info.width:,}x{info.height:,} pixels a frame, more than "
                f"the limit of {limits['pixels']:,}"
            )
        info.video_codec = context.codec.canonical_name
        rate = video.average_rate or video.guessed_rate
        info.frame_rate = round(float(rate), 3) if rate else None
    if audio is not None:
        info.audio_codec = audio.codec_context.codec.canonical_name
        info.sample_rate = int(audio.codec_context.sample_rate or 0) or None
        info.channels = int(audio.codec_context.channels or 0) or None
        if info.sample_rate is None:
            raise AvMediaError("the audio stream has no sample rate")
    claimed = _claimed_seconds(container, video or audio)
    if claimed is not None and claimed > limits["seconds"]:
        raise AvMediaError(
            f"the header claims a duration of {claimed:,.0f} s, longer than the limit of "
            f"{limits['seconds']:,} s"
        )
    try:
        info.format = _served_format(demuxer, info, container)
    except _NotPlayable as exc:
        if not _transcodable(demuxer, info):
            raise AvMediaError(f"{exc}, and it cannot be transcoded") from None
        info.format, info.transcode = TRANSCODED_FORMATS[kind], True
    return info


def _transcodable(demuxer: str, info: AvInfo) -> bool:
    if demuxer not in _TRANSCODED_CONTAINERS:
        return False
    if info.kind == Media.Kind.VIDEO and info.video_codec not in _TRANSCODED_VIDEO_CODECS:
        return False
    return not info.audio_codec or info.audio_codec in _TRANSCODED_AUDIO_CODECS


def _claimed_seconds(container, stream) -> float | None:
    candidates = []
    if container.duration is not None and container.duration > 0:
        candidates.append(container.duration / av.time_base)
    if stream is not None and stream.duration and stream.time_base:
        candidates.append(float(stream.duration * stream.time_base))
    return max(candidates) if candidates else None


def _served_format(demuxer: str, info: AvInfo, container) -> str:
    if info.kind == Media.Kind.VIDEO:
        if demuxer == _MP4_FAMILY:
            served = Media.Format.MP4
        elif demuxer == _MATROSKA:
            # Matroska holding WebM's codecs (checked below) is served as WebM: a remux.
            served = Media.Format.WEBM
        else:
            raise _NotPlayable(
                f"a browser cannot play this container ({demuxer}): give MP4 or WebM video"
            )
        if info.video_codec not in _VIDEO_CODECS[served]:
            raise _NotPlayable(
                f"a browser cannot play {info.video_codec} video in {served}: use one of "
                f"{', '.join(sorted(_VIDEO_CODECS[served]))}"
            )
        allowed_audio = _AUDIO_CODECS_WITH_VIDEO[served]
        if info.audio_codec and info.audio_codec not in allowed_audio:
            raise _NotPlayable(
                f"a browser cannot play {info.audio_codec} audio in {served}: use one of "
                f"{', '.join(sorted(allowed_audio))}"
            )
        return served
    entry = _AUDIO_FORMATS.get(demuxer)
    if entry is None:
        raise _NotPlayable(
            f"a browser cannot play this container ({demuxer}): give MP3, WAV, Ogg, FLAC, "
            "M4A or WebM audio"
        )
    served, codecs = entry
    if info.audio_codec not in codecs:
        raise _NotPlayable(
            f"a browser cannot play {info.audio_codec} audio in {served}: use one of "
            f"{', '.join(sorted(codecs))}"
        )
    return served


def _decode(container, info: AvInfo, *, limits: dict[str, int], remux: _Remux | None) -> None:
    """Decodes every frame of the streams served, proving the file is whole; makes the poster
    and the peaks on the way, and measures the real duration. Each packet decoded is then
    given to ``remux``."""
    video = container.streams.video[0] if info.kind == Media.Kind.VIDEO else None
    audio = container.streams.audio[0] if container.streams.audio else None
    streams = [s for s in (video, audio) if s is not None]
    for stream in streams:
        # One decoding thread: files are checked one per core in bounded children, and a
        # thread's stack would count against the child's memory limit.
        stream.codec_context.thread_count = 1
    peaks = _Peaks(info.sample_rate or 1) if info.kind == Media.Kind.AUDIO else None
    loudness = FrameLoudness() if peaks is not None else None
    frames = {stream.index: 0 for stream in streams}
    end_seconds = 0.0
    try:
        for packet in container.demux(streams):
            for frame in packet.decode():
                frames[packet.stream.index] += 1
                if frame.time is not None:
                    end_seconds = max(end_seconds, float(frame.time))
                    if end_seconds > limits["seconds"]:
                        raise AvMediaError(f"longer than the limit of {limits['seconds']:,} s")
                if packet.stream is video and info.poster_jpeg is None:
                    info.poster_jpeg = _poster(frame)
                elif peaks is not None and loudness is not None and packet.stream is audio:
                    samples = frame.to_ndarray()
                    peaks.add(samples)
                    loudness.add(frame, _as_float(samples))
            if remux is not None:
                remux.add(packet)
    except AvMediaError:
        raise
    except (av.FFmpegError, ValueError, MemoryError) as exc:
        raise AvMediaError(f"corrupt or truncated: {av_reason(exc)}") from None
    for stream in streams:
        if frames[stream.index] == 0:
            raise AvMediaError(f"corrupt or truncated: its {stream.type} stream decodes to nothing")
    if video is not None and info.frame_rate is None:
        raise AvMediaError("the video stream has no frame rate")
    info.duration_seconds = round(_duration(container, video or audio, end_seconds), 3)
    if peaks is not None:
        info.peaks = peaks.reduced()
    if loudness is not None:
        info.loudness_lufs = loudness.integrated()


def _duration(container, stream, decoded_end: float) -> float:
    claimed = _claimed_seconds(container, stream)
    return claimed if claimed is not None else decoded_end


def _poster(frame) -> bytes:
    # JPEG: a 480p frame takes 5 ms where PNG takes 300 ms, and a third of the bytes.
    out = io.BytesIO()
    frame.to_image().save(out, format="JPEG", quality=_POSTER_QUALITY)
    return out.getvalue()


class _Peaks:
    """The loudest |sample| per short block, across channels, gathered while decoding."""

    def __init__(self, sample_rate: int):
        self.block = max(1, int(sample_rate * _PEAK_BLOCK_SECONDS))
        self.blocks: list[float] = []
        self.pending = np.zeros(0, dtype=np.float32)

    def add(self, samples: np.ndarray) -> None:
        values = np.abs(_as_float(samples))
        # Planar layouts are (channels, samples); packed ones (1, samples * channels).
        mono = values.max(axis=0) if values.ndim == 2 else values
        data = np.concatenate([self.pending, mono])
        whole = len(data) // self.block * self.block
        if whole:
            self.blocks.extend(data[:whole].reshape(-1, self.block).max(axis=1).tolist())
        self.pending = data[whole:]

    def reduced(self) -> list[float]:
        blocks = self.blocks + ([float(self.pending.max())] if len(self.pending) else [])
        if not blocks:
            return []
        count = min(WAVEFORM_PEAKS, len(blocks))
        edges = np.linspace(0, len(blocks), count + 1).astype(int)
        array = np.asarray(blocks, dtype=np.float32)
        return [
            round(min(1.0, float(array[start:end].max())), _PEAK_DECIMALS)
            for start, end in itertools.pairwise(edges)
            if end > start
        ]


def _as_float(samples: np.ndarray) -> np.ndarray:
    if samples.dtype.kind == "f":
        return samples.astype(np.float32, copy=False)
    if samples.dtype.kind == "u":
        bits = samples.dtype.itemsize * 8
        return (samples.astype(np.float32) - 2 ** (bits - 1)) / 2 ** (bits - 1)
    return samples.astype(np.float32) / float(np.iinfo(samples.dtype).max)


class _Remux:
    """The served copy being written, packet by packet, with the digest of what went in."""

    def __init__(self, dest: Path, info: AvInfo, streams: list):
        muxer = _MUXERS[info.format]
        self.dest = dest
        self.expected = _PacketDigest()
        try:
            self.container = av.open(
                str(dest), mode="w", format=muxer, options=_MUXER_OPTIONS.get(muxer, {})
            )
            self.container.metadata.clear()
            self.outputs = {}
            for stream in streams:
                output = self.container.add_stream_from_template(stream)
                output.metadata.clear()
                self.outputs[stream.index] = output
        except av.FFmpegError as exc:
            raise AvMediaError(
                f"cannot be remuxed without its metadata: {av_reason(exc)}"
            ) from None
        self._open = True

    def add(self, packet) -> None:
        if packet.dts is None and packet.size == 0:
            return  # the flush packet demux yields at the end
        output = self.outputs[packet.stream.index]
        self.expected.add(output.index, packet)
        packet.stream = output
        try:
            self.container.mux(packet)
        except av.FFmpegError as exc:
            raise AvMediaError(
                f"cannot be remuxed without its metadata: {av_reason(exc)}"
            ) from None

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                self.container.close()
            except av.FFmpegError as exc:
                raise AvMediaError(
                    f"cannot be remuxed without its metadata: {av_reason(exc)}"
                ) from None

    def check(self) -> None:
        """Reads the copy back; raises ``AvMediaError`` unless its packets are the ones added."""
        found = _PacketDigest()
        try:
            with av.open(str(self.dest), mode="r", options=_READ_BACK_OPTIONS) as served:
                for packet in served.demux(list(served.streams)):
                    if packet.dts is None and packet.size == 0:
                        continue
                    found.add(packet.stream.index, packet)
        except av.FFmpegError as exc:
            raise AvMediaError(
                f"cannot be remuxed without its metadata: {av_reason(exc)}"
            ) from None
        if found.digests != self.expected.digests:
            raise AvMediaError("its copy without metadata does not hold the same packets")

    def discard(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(av.FFmpegError):
                self.container.close()
        self.dest.unlink(missing_ok=True)


def _served_streams(container, info: AvInfo) -> list:
    streams = []
    if info.kind == Media.Kind.VIDEO:
        streams.append(container.streams.video[0])
    if container.streams.audio:
        streams.append(container.streams.audio[0])
    return streams


class _PacketDigest:
    """A hash of each stream's packet payloads, in order."""

    def __init__(self):
        self._hashes: dict[int, hashlib._Hash] = {}

    def add(self, index: int, packet) -> None:
        self._hashes.setdefault(index, hashlib.sha256()).update(bytes(packet))

    @property
    def digests(self) -> dict[int, str]:
        return {index: digest.hexdigest() for index, digest in self._hashes.items()}


def av_reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, av.FFmpegError) and exc.strerror:
        text = exc.strerror
    return text[:200]


@dataclass
class AvPrepared:
    """A file checked and its served copy made (``av_prepare``), or why it was refused."""

    info: AvInfo | None = None
    served: Path | None = None  # None when it waits for a transcode
    served_sha256: str = ""
    error: str = ""


def av_prepare(path: Path, *, kind: str, staging: Path, limits: dict[str, int]) -> AvPrepared:
    """Checks the file at ``path`` and writes its served copy into the folder ``staging``
    (unless it is to be transcoded): what an import does with each video and audio file,
    in any process (it touches no database and no settings)."""
    served = staging / f"served-{uuid.uuid4().hex}"
    try:
        info = av_inspect(path, kind=kind, limits=limits, strip_to=served)
    except AvMediaError as exc:
        if isinstance(exc.__context__, MemoryError):
            raise  # the bounded child's memory limit, which its refusal names
        return AvPrepared(error=str(exc))
    if info.transcode:
        return AvPrepared(info=info)
    return AvPrepared(info=info, served=served, served_sha256=file_sha256(served))
