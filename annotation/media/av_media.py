"""Video and audio for an import, with PyAV (FFmpeg's libraries): probed, checked against the
limits, then decoded once, frame by frame, and re-encoded into the one format the app serves:
H.264 and AAC in MP4 (video), AAC in M4A (audio). The decoding pass proves the file plays,
makes a video's poster frame and an audio clip's waveform peaks and loudness, and writes the
served copy; memory does not grow with the duration.

The served copy is rebuilt from the decoded pixels and samples, never copied from the file: a
name a generator hid anywhere in it (container or stream tags, ID3v1/v2, APE, Vorbis comments,
iTunes atoms, WAV INFO chunks, the LAME or x264 encoder string, chapters, attachments,
subtitle or data streams, bytes between frames or after the last) cannot reach an annotator,
and every served file has the same container, codecs and settings whatever the source was, so
its format says nothing about the model that made it. None of the settings depends on the
source but the content itself: frame size (rotation applied to the pixels), frame rate and
colour tags. What the copy keeps, and the measurements behind its quality, are in
docs/import-format.md ("What a served video or audio clip keeps").

The original is stored byte for byte for releases. Files are read from disk in packets, never
whole. Limits: docs/operations.md ("Limits"); each is checked from the header before decoding
and again while decoding (``annotation.media.av_probe``), so a file whose header lies is
stopped at the limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import uuid
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from annotation.media.av_probe import (
    DECODE_ERRORS,
    HTML_STARTS,
    AvInfo,
    AvMediaError,
    DecodeBudget,
    av_limits,
    av_probe,
    av_reason,
    claimed_seconds,
    file_sha256,
    served_rate,
)
from annotation.media.av_samples import AudioPeaks, frame_samples
from annotation.media.bounded import BoundedError
from annotation.media.loudness import FrameLoudness
from annotation.models import Media

_POSTER_QUALITY = 90


# The served copy's settings (docs/import-format.md, "What a served video or audio clip
# keeps", has the measurements): x264 at CRF 16 with preset "veryfast" kept every frame of the
# generated clips (noise scrolling, small text, colour ramps, a zone plate) at SSIM 0.994 or
# more (the media issue asks 0.98 at CRF 18 or lower) and PSNR 39 dB or more; "faster" adds
# about 2 dB on noise for 1.5 to 1.8 times the encoder's CPU, which made the import run at
# 0.6 times a plain transcode (docs/operations.md, "Import speed").
X264_OPTIONS = {"preset": "veryfast", "crf": "16"}
AUDIO_RATE = 48000
AUDIO_BIT_RATE = 192_000
AUDIO_LAYOUT = "stereo"
_AUDIO_TIME_BASE = Fraction(1, AUDIO_RATE)
# Keeps the AAC encoder from writing its name and version ("Lavc...") into the stream.
_BITEXACT = {"flags": "+bitexact"}
# FFmpeg's numbers for the BT.601 matrix (SMPTE 170M) and the two colour ranges.
_BT601 = 6
_LIMITED_RANGE, _FULL_RANGE = 1, 2
# +faststart puts the index first, so a browser starts playing before the whole file has
# arrived; +bitexact keeps the muxer from writing its name and version ("Lavf...").
_MUXER_OPTIONS = {"movflags": "+faststart", "fflags": "+bitexact"}
# NAL units of type 6 (SEI): x264's user data names its version and options.
_SEI_FILTER = "filter_units=remove_types=6"
# The copy read back is one this module wrote, its streams declared in its header.
_READ_BACK_OPTIONS = {"probesize": "65536", "analyzeduration": "1"}
# A RIFF WAVE file's parameters are all in its header; but for 16-bit PCM, FFmpeg's WAV
# demuxer asks for the codec to be probed (is it DTS or AC-3 carried as PCM?), and opening
# runs every codec prober over up to 32 packets of samples, as far as ``probesize`` lets it:
# 21 ms for a five-second 44.1 kHz stereo clip here, a sixth of its whole check and copy.
# 4 KiB holds the header and the first frames a prober needs; the full decode checks the rest.
_WAV_OPEN_OPTIONS = {"probesize": "4096"}
# Packets a decoder may refuse before the file is called corrupt: a few, and 1% of the rest.
_SKIPPED_PACKETS = 2
_SKIPPED_SHARE = 0.01


def av_inspect(
    path: Path,
    *,
    kind: str,
    limits: dict[str, int] | None = None,
    served_to: Path | None = None,
    original_to: Path | None = None,
) -> AvInfo:
    """Probes and fully decodes the file at ``path`` as a ``kind`` ("video" or "audio");
    raises ``AvMediaError`` naming the reason it cannot be accepted. ``limits``: those of
    ``av_limits()``, passed by a caller in another process. With ``served_to``, the served
    copy is encoded there in the same pass and read back; with ``original_to``, the file's
    bytes are copied there (and synced) as they are hashed."""
    limits = limits or av_limits()
    size = path.stat().st_size
    if size == 0:
        raise AvMediaError("the file is empty")
    if size > limits[kind]:
        raise AvMediaError(f"the {kind} is larger than {limits[kind]:,} bytes")
    with open(path, "rb") as handle:
        start = handle.read(512)
    if start.lstrip().lower().startswith(HTML_STARTS):
        raise AvMediaError(f"not a {kind} file: it is an HTML or XML page")
    try:
        container = av_open_input(path, start)
    except (*DECODE_ERRORS, UnicodeDecodeError) as exc:
        raise AvMediaError(
            f"cannot be read as {kind} (corrupt, truncated or another kind of file): "
            f"{av_reason(exc)}"
        ) from None
    encoder = None
    try:
        with container:
            info = av_probe(container, kind=kind, size=size, limits=limits)
            if served_to is not None:
                encoder = _Encoder(served_to, container, info, threads=limits["threads"])
            _decode(container, info, limits=limits, encoder=encoder)
            if encoder is not None:
                encoder.close()
        if encoder is not None:
            encoder.check()
    except BaseException:
        if encoder is not None:
            encoder.discard()
        raise
    info.sha256 = file_sha256(path) if original_to is None else _copy_synced(path, original_to)
    return info


def av_open_input(path: Path, start: bytes):
    """``av.open`` of the file at ``path`` whose first bytes are ``start``, bounding a WAV's
    codec probing (``_WAV_OPEN_OPTIONS``)."""
    wav = start[:4] in (b"RIFF", b"RF64") and start[8:12] == b"WAVE"
    return av.open(str(path), mode="r", options=_WAV_OPEN_OPTIONS if wav else None)


def _copy_synced(source: Path, dest: Path) -> str:
    """Copies ``source`` to ``dest`` and syncs it; returns the bytes' sha256."""
    digest = hashlib.sha256()
    with open(source, "rb") as reader, open(dest, "wb") as writer:
        while chunk := reader.read(1 << 20):
            digest.update(chunk)
            writer.write(chunk)
        writer.flush()
        os.fsync(writer.fileno())
    return digest.hexdigest()


def _sync_sha256(path: Path) -> str:
    """The sha256 of the file at ``path``, synced to disk on the way."""
    digest = hashlib.sha256()
    with open(path, "rb+") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
        os.fsync(handle.fileno())
    return digest.hexdigest()


def _decode(container, info: AvInfo, *, limits: dict[str, int], encoder: _Encoder | None) -> None:
    """Decodes every frame of the streams served, proving the file is whole, within the
    limits; makes the poster and the peaks on the way and hands each frame to ``encoder``."""
    video = container.streams.video[0] if info.kind == Media.Kind.VIDEO else None
    audio = container.streams.audio[0] if container.streams.audio else None
    streams = [s for s in (video, audio) if s is not None]
    for stream in streams:
        # A fixed thread count (``ARBITER_MEDIA_THREADS``, 1 by default): files are checked
        # one per core in bounded children, and each thread's stack counts against the
        # child's memory limit, which then means what it says.
        stream.codec_context.thread_count = limits["threads"]
    peaks = AudioPeaks(info.sample_rate or 1) if info.kind == Media.Kind.AUDIO else None
    loudness = FrameLoudness() if peaks is not None else None
    budget = DecodeBudget(limits)
    frames = {stream.index: 0 for stream in streams}
    packets = skipped = 0
    try:
        for packet in container.demux(streams):
            packets += 1
            try:
                decoded = packet.decode()
            except av.InvalidDataError:
                # A packet the decoder cannot read (bytes between the last frame and a tag
                # at the end of an MP3, say) is skipped, as a player skips it.
                skipped += 1
                continue
            for frame in decoded:
                frames[packet.stream.index] += 1
                if packet.stream is video:
                    budget.video(frame)
                    if encoder is not None:
                        encoder.video(frame)
                    if info.poster_jpeg is None:
                        info.poster_jpeg = _poster(
                            _upright(frame, *_even(frame), turns=_quarter_turns(frame))
                        )
                    continue
                budget.audio(frame)
                if encoder is not None:
                    encoder.audio(frame)
                if peaks is not None and loudness is not None:
                    samples = frame_samples(frame)
                    peaks.add(samples)
                    loudness.add(frame, samples)
    except AvMediaError:
        raise
    except DECODE_ERRORS as exc:
        raise AvMediaError(f"corrupt or truncated: {av_reason(exc)}") from None
    if skipped > _SKIPPED_PACKETS + packets * _SKIPPED_SHARE:
        raise AvMediaError(f"corrupt: {skipped:,} of its {packets:,} packets cannot be decoded")
    for stream in streams:
        if frames[stream.index] == 0:
            raise AvMediaError(f"corrupt or truncated: its {stream.type} stream decodes to nothing")
    claimed = claimed_seconds(container, video or audio)
    info.duration_seconds = round(claimed if claimed is not None else budget.end, 3)
    if peaks is not None:
        info.peaks = peaks.reduced()
    if loudness is not None:
        info.loudness_lufs = loudness.integrated()


def _even(frame) -> tuple[int, int]:
    # 4:2:0 chroma needs even sides: an odd one loses its last row or column.
    return max(2, frame.width - frame.width % 2), max(2, frame.height - frame.height % 2)


def _quarter_turns(frame) -> int:
    """Counter-clockwise quarter turns that show the frame upright (its display matrix)."""
    return round((frame.rotation or 0) / 90) % 4


def _upright(frame, width: int, height: int, *, turns: int):
    """The frame in yuv420p at ``width`` x ``height``, then given ``turns`` counter-clockwise
    quarter turns."""
    out = frame.reformat(width=width, height=height, format="yuv420p", threads=1)
    # The source's frame types go: x264 would make a keyframe of each of its I frames.
    out.pict_type = av.video.frame.PictureType.NONE
    if turns == 0:
        return out
    flat = out.to_ndarray().reshape(-1)
    luma = flat[: width * height].reshape(height, width)
    quarter = width * height // 4
    chroma = [
        flat[width * height + i * quarter : width * height + (i + 1) * quarter].reshape(
            height // 2, width // 2
        )
        for i in (0, 1)
    ]
    planes = [np.rot90(plane, turns).reshape(-1) for plane in (luma, *chroma)]
    rows, columns = (height, width) if turns % 2 == 0 else (width, height)
    turned = av.VideoFrame.from_ndarray(
        np.concatenate(planes).reshape(rows * 3 // 2, columns), format="yuv420p"
    )
    for attribute in ("colorspace", "color_range", "color_primaries", "color_trc"):
        setattr(turned, attribute, getattr(out, attribute))
    return turned


def _poster(frame) -> bytes:
    # JPEG: a 480p frame takes 5 ms where PNG takes 300 ms, and a third of the bytes.
    out = io.BytesIO()
    frame.to_image().save(out, format="JPEG", quality=_POSTER_QUALITY)
    return out.getvalue()


class _Encoder:
    """The served copy being written as frames are decoded: H.264 at a constant frame rate
    (the source's average, at most 60 a second: a frame is repeated or dropped by its
    timestamp, as a player at that rate would show it), a keyframe every second, and AAC
    stereo at 48 kHz, in MP4 with no metadata."""

    def __init__(self, dest: Path, source, info: AvInfo, *, threads: int):
        self.dest = dest
        self.threads = threads
        # PyAV's streams and filter (untyped here, as PyAV's frames and packets are): the
        # video's are made at the first frame, the audio's now.
        self.video_out: Any = None
        self.audio_out: Any = None
        self.sei_filter: Any = None
        self.video_source: Any = source.streams.video[0] if info.kind == Media.Kind.VIDEO else None
        audio = source.streams.audio[0] if source.streams.audio else None
        start = source.start_time
        self.origin = start / av.time_base if start is not None and start > 0 else 0.0
        # Audio encoded before the video stream exists (it is added at the first frame,
        # which says how the picture is turned), muxed once it does.
        self.held: list | None = [] if self.video_source is not None else None
        self.next_index = 0
        self.last_frame = None
        self.samples_written: int | None = None
        try:
            self.container = av.open(str(dest), mode="w", format="mp4", options=_MUXER_OPTIONS)
            if audio is not None:
                self._audio_stream(audio, mono=(info.channels or 1) == 1)
        except DECODE_ERRORS as exc:
            self._fail(exc)
        self._open = True

    def _video_stream(self, first) -> None:
        """Adds the H.264 stream, shaped by the first decoded frame and turned upright."""
        source = self.video_source
        rate = served_rate(source.average_rate or source.guessed_rate)
        self.rate = rate
        keyint = max(1, round(rate))
        options = {
            **X264_OPTIONS,
            # Exactly one keyframe a second, and none elsewhere: seeking is frame-accurate.
            "x264-params": f"keyint={keyint}:min-keyint={keyint}:scenecut=0",
        }
        self.size = _even(first)
        self.turns = _quarter_turns(first)
        stream = self.container.add_stream("libx264", rate=rate, options=options)
        width, height = self.size
        stream.width, stream.height = (height, width) if self.turns % 2 else (width, height)
        stream.pix_fmt = "yuv420p"
        stream.time_base = 1 / rate
        stream.codec_context.time_base = 1 / rate
        stream.codec_context.thread_count = self.threads
        # The colour tags are the content's: kept. A full-range YUV source (yuvj*) becomes
        # limited range in yuv420p; an RGB one is converted with the BT.601 matrix.
        pix_fmt = first.format.name
        yuv = pix_fmt.startswith("yuv")
        stream.codec_context.color_primaries = first.color_primaries
        stream.codec_context.color_trc = first.color_trc
        stream.codec_context.colorspace = first.colorspace if yuv else _BT601
        full = yuv and not pix_fmt.startswith("yuvj") and first.color_range == _FULL_RANGE
        stream.codec_context.color_range = _FULL_RANGE if full else _LIMITED_RANGE
        stream.metadata.clear()
        self.video_out = stream
        self.sei_filter = av.bitstream.BitStreamFilterContext(_SEI_FILTER, stream)
        for packet in self.held or ():
            self.container.mux(packet)
        self.held = None

    def _audio_stream(self, source, *, mono: bool) -> None:
        stream = self.container.add_stream(
            "aac", rate=AUDIO_RATE, layout=AUDIO_LAYOUT, options=_BITEXACT
        )
        stream.bit_rate = AUDIO_BIT_RATE
        stream.metadata.clear()
        self.audio_out = stream
        # A mono source is resampled as mono and its channel written twice (a downmix to
        # stereo would lower it by 3 dB); others are mixed to stereo as a player would.
        self.mono = mono
        self.resampler = av.AudioResampler(
            format="fltp", layout="mono" if mono else AUDIO_LAYOUT, rate=AUDIO_RATE
        )

    def video(self, frame) -> None:
        """Encodes a decoded frame; an encoder's failure (x264 that cannot allocate its
        buffers, say) refuses the file as one that cannot be re-encoded, not as corrupt."""
        try:
            self._video(frame)
        except DECODE_ERRORS as exc:
            self._fail(exc)

    def _video(self, frame) -> None:
        if self.video_out is None:
            self._video_stream(frame)
        time = frame.time
        index = self.next_index if time is None else round((time - self.origin) * self.rate)
        if index < self.next_index and self.last_frame is not None:
            return  # a frame between two of the constant rate's: dropped
        upright = _upright(frame, *self.size, turns=self.turns)
        while self.next_index < index and self.last_frame is not None:
            self._encode_video(self.last_frame)  # a gap: the last frame is shown longer
        self.next_index = max(self.next_index, index)
        self._encode_video(upright)
        self.last_frame = upright

    def _encode_video(self, frame) -> None:
        # The codec's time base: the stream's becomes the muxer's once the header is written.
        frame.pts, frame.time_base = self.next_index, 1 / self.rate
        self.next_index += 1
        self._mux_video(self.video_out.encode(frame))

    def _mux_video(self, packets) -> None:
        for packet in packets:
            for filtered in self.sei_filter.filter(packet):
                filtered.stream = self.video_out
                self.container.mux(filtered)

    def audio(self, frame) -> None:
        try:
            self._audio(frame)
        except DECODE_ERRORS as exc:
            self._fail(exc)

    def _audio(self, frame) -> None:
        if self.audio_out is None:
            return
        if self.samples_written is None:
            start = float(frame.time or 0.0) - self.origin
            self.samples_written = max(0, round(start * AUDIO_RATE))
        self._encode_audio(self.resampler.resample(frame))

    def _encode_audio(self, pieces) -> None:
        for piece in pieces:
            if self.mono:
                samples = piece.to_ndarray()
                piece = av.AudioFrame.from_ndarray(
                    np.concatenate([samples, samples]), format="fltp", layout=AUDIO_LAYOUT
                )
                piece.sample_rate = AUDIO_RATE
            piece.pts, piece.time_base = self.samples_written, _AUDIO_TIME_BASE
            self.samples_written = (self.samples_written or 0) + piece.samples
            self._mux_audio(self.audio_out.encode(piece))

    def _mux_audio(self, packets) -> None:
        for packet in packets:
            if self.held is not None:
                self.held.append(packet)
            else:
                self.container.mux(packet)

    def close(self) -> None:
        if not self._open:
            return
        try:
            if self.video_out is not None:
                self._mux_video(self.video_out.encode(None))
                self._mux_video(self.sei_filter.filter(None))
            if self.audio_out is not None:
                if self.samples_written is not None:
                    self._encode_audio(self.resampler.resample(None))
                self._mux_audio(self.audio_out.encode(None))
            self._open = False
            self.container.close()
        except DECODE_ERRORS as exc:
            self._fail(exc)

    def check(self) -> None:
        """Reads the copy back: it must hold the streams written, each with packets."""
        try:
            with av.open(str(self.dest), mode="r", options=_READ_BACK_OPTIONS) as served:
                wanted = [s for s in served.streams if s.type in ("video", "audio")]
                counts = {stream.index: 0 for stream in wanted}
                for packet in served.demux(wanted):
                    if packet.size:
                        counts[packet.stream.index] += 1
        except DECODE_ERRORS as exc:
            self._fail(exc)
        expected = (self.video_out is not None) + (self.audio_out is not None)
        if len(counts) != expected or not all(counts.values()):
            raise AvMediaError("its re-encoded copy lacks a stream")

    def discard(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(*DECODE_ERRORS):
                self.container.close()
        self.dest.unlink(missing_ok=True)

    def _fail(self, exc: BaseException):
        raise AvMediaError(f"cannot be re-encoded: {av_reason(exc)}") from None


@dataclass
class AvPrepared:
    """A file checked and its served copy made (``av_prepare``), or why it was refused."""

    info: AvInfo | None = None
    served: Path | None = None
    served_sha256: str = ""
    error: str = ""
    # With ``keep_original``: the file's bytes, copied into the staging folder and synced.
    original: Path | None = None


def av_prepare(
    path: Path, *, kind: str, staging: Path, limits: dict[str, int], keep_original: bool = False
) -> AvPrepared:
    """Checks the file at ``path`` and writes its served copy into the folder ``staging``,
    synced (with ``keep_original``, a copy of the file too): what an import does with each
    video and audio file, in any process (it touches no database and no settings). A refusal
    is ``error``; only a failed allocation raises (the bounded child that runs it names the
    memory limit in its refusal)."""
    served = staging / f"served-{uuid.uuid4().hex}"
    original = staging / f"original-{uuid.uuid4().hex}" if keep_original else None
    try:
        info = av_inspect(path, kind=kind, limits=limits, served_to=served, original_to=original)
    except AvMediaError as exc:
        if isinstance(exc.__context__, MemoryError):
            raise  # the bounded child's memory limit, which its refusal names
        return AvPrepared(error=str(exc))
    except BaseException:
        if original is not None:
            original.unlink(missing_ok=True)
        raise
    return AvPrepared(
        info=info, served=served, served_sha256=_sync_sha256(served), original=original
    )


def av_outcome(outcome: object) -> AvPrepared:
    """What a bounded ``av_prepare`` gave: its result, or the refusal its failure means (a
    limit hit, or an error the file provoked in the decoder)."""
    if isinstance(outcome, AvPrepared):
        return outcome
    if isinstance(outcome, BoundedError):
        return AvPrepared(error=str(outcome))
    return AvPrepared(error=f"could not be read ({type(outcome).__name__}: {outcome})")
