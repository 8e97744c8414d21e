"""Tiny video, audio and GLB files made at test time with PyAV and numpy (nothing downloaded),
with a model name planted in every metadata field the served copy must lose."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import av
import numpy as np

PLANTED = "SecretGen-9000"
_TAGS = ("title", "comment", "encoder", "artist", "album", "description", "copyright")


def video_write(
    path: Path,
    *,
    fmt: str = "mp4",
    codec: str = "libx264",
    frames: int = 4,
    audio: bool = True,
    rate: int = 10,
) -> Path:
    """A few 64x48 frames (``rate`` a second) of a moving bar (and a tone as long), tagged
    with PLANTED."""
    with av.open(str(path), "w", format=fmt) as container:
        for tag in _TAGS:
            container.metadata[tag] = PLANTED
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.metadata["handler_name"] = PLANTED
        stream.metadata["title"] = PLANTED
        sound = None
        if audio:
            sound = container.add_stream("aac" if fmt == "mp4" else "libopus", rate=48000)
            sound.metadata["title"] = PLANTED
        for index in range(frames):
            pixels = np.zeros((48, 64, 3), np.uint8)
            column = index % 8 * 8
            pixels[:, column : column + 8] = (255, 64, 0)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if sound is not None:
            _tone_mux(container, sound, seconds=frames / rate)
    return path


def _tone(rate: int, seconds: float, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def _tone_mux(container, stream, *, seconds: float) -> None:
    rate = stream.codec_context.sample_rate
    samples = _tone(rate, seconds)
    fmt = stream.codec_context.format.name
    chunk = stream.codec_context.frame_size or 1024
    pts = 0
    for start in range(0, len(samples), chunk):
        piece = samples[start : start + chunk]
        if fmt.startswith("s16"):
            data = (piece * 32767).astype(np.int16).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
        else:
            frame = av.AudioFrame.from_ndarray(piece.reshape(1, -1), format="fltp", layout="mono")
        frame.sample_rate, frame.pts = rate, pts
        pts += len(piece)
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


_AUDIO_CODECS = {"wav": "pcm_s16le", "mp3": "libmp3lame", "flac": "flac", "ogg": "libopus"}


def audio_write(path: Path, *, fmt: str = "wav", seconds: float = 0.2) -> Path:
    """A 0.2 s 440 Hz tone, tagged with PLANTED (ID3 for MP3, INFO for WAV)."""
    codec = _AUDIO_CODECS[fmt]
    with av.open(str(path), "w", format=fmt) as container:
        for tag in _TAGS:
            container.metadata[tag] = PLANTED
        rate = 48000 if codec == "libopus" else 16000
        stream = container.add_stream(codec, rate=rate)
        if codec == "libmp3lame":
            stream.codec_context.sample_rate = 16000
        stream.layout = "mono"
        _tone_mux(container, stream, seconds=seconds)
    return path


def decoded_digests(path: Path) -> dict[str, list[str]]:
    """Every decoded video frame's and audio frame's hash, per stream type."""
    out: dict[str, list[str]] = {"video": [], "audio": []}
    with av.open(str(path)) as container:
        streams = [*container.streams.video[:1], *container.streams.audio[:1]]
        for frame in container.decode(*streams):
            kind = "video" if isinstance(frame, av.VideoFrame) else "audio"
            out[kind].append(hashlib.sha256(frame.to_ndarray().tobytes()).hexdigest())
    return out


def glb_bytes(*, generator: str = PLANTED, json_extra: dict | None = None) -> bytes:
    """A one-triangle binary glTF whose asset.generator, extras and names carry PLANTED."""
    positions = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()
    document = {
        "asset": {"version": "2.0", "generator": generator, "copyright": PLANTED,
                  "extras": {"model": PLANTED}},
        "scene": 0,
        "scenes": [{"nodes": [0], "name": PLANTED}],
        "nodes": [{"mesh": 0, "name": PLANTED, "extras": {"by": PLANTED}}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}}], "name": PLANTED}],
        "buffers": [{"byteLength": len(positions)}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": len(positions)}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                       "min": [0, 0, 0], "max": [1, 1, 0]}],
        "extras": {"generated_by": PLANTED},
    }  # fmt: skip
    document.update(json_extra or {})
    return glb_pack(json.dumps(document).encode(), positions)


def glb_pack(json_chunk: bytes, bin_chunk: bytes) -> bytes:
    json_chunk += b" " * (-len(json_chunk) % 4)
    bin_chunk += b"\x00" * (-len(bin_chunk) % 4)
    body = struct.pack("<I4s", len(json_chunk), b"JSON") + json_chunk
    body += struct.pack("<I4s", len(bin_chunk), b"BIN\x00") + bin_chunk
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body
