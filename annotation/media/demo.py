"""The demo's video, audio and 3D pairs, made at demo time (nothing downloaded): short videos
of a moving shape encoded with PyAV (the rival has the wrong colour, stutters, or moves the
wrong way), tones made with numpy (the rival has the wrong pitch, is clipped, or is silent),
and binary glTF models (the rival has the wrong shape or colour). ``demo_media_write``
writes the files and a pairs file in the import format; the same seed gives the same pairs.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

VIDEO_SIZE = (160, 120)
VIDEO_FPS = 12
VIDEO_SECONDS = 2
AUDIO_RATE = 22050
AUDIO_SECONDS = 1.5

COLOURS = {"red": (220, 40, 40), "blue": (40, 80, 220), "green": (40, 170, 70)}


@dataclass(frozen=True)
class _Clip:
    colour: str
    direction: int = 1  # 1: left to right
    stutter: bool = False


def _video_frames(clip: _Clip, shape: str):
    width, height = VIDEO_SIZE
    frames = VIDEO_FPS * VIDEO_SECONDS
    size = 28
    yy, xx = np.mgrid[0:height, 0:width]
    for index in range(frames):
        # A stutter holds every other position for three frames, then jumps.
        step = (index // 3) * 3 if clip.stutter else index
        progress = step / (frames - 1)
        if clip.direction < 0:
            progress = 1 - progress
        cx = int(size + progress * (width - 2 * size))
        cy = height // 2
        pixels = np.full((height, width, 3), 245, np.uint8)
        if shape == "circle":
            mask = (xx - cx) ** 2 + (yy - cy) ** 2 <= (size // 2) ** 2
        else:
            mask = (abs(xx - cx) <= size // 2) & (abs(yy - cy) <= size // 2)
        pixels[mask] = COLOURS[clip.colour]
        yield pixels


def video_write(path: Path, clip: _Clip, *, shape: str) -> None:
    """An MP4 (H.264) of ``shape`` crossing the frame, put in place once whole."""
    partial = path.with_name(f".{path.name}.partial")
    with av.open(str(partial), "w", format="mp4") as container:
        # One thread and no lookahead threads: the same bytes every time, so that loading
        # the demo again finds its pairs unchanged.
        stream = container.add_stream(
            "libx264",
            rate=VIDEO_FPS,
            options={"preset": "veryfast", "x264-params": "threads=1:lookahead-threads=1"},
        )
        stream.codec_context.thread_count = 1
        stream.codec_context.thread_type = "NONE"
        stream.width, stream.height = VIDEO_SIZE
        stream.pix_fmt = "yuv420p"
        for pixels in _video_frames(clip, shape):
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    partial.replace(path)


def _tone(frequency: float) -> np.ndarray:
    t = np.arange(int(AUDIO_RATE * AUDIO_SECONDS)) / AUDIO_RATE
    envelope = np.minimum(1.0, np.minimum(t, AUDIO_SECONDS - t) * 20)  # no clicks
    return 0.5 * envelope * np.sin(2 * np.pi * frequency * t)


def audio_write(path: Path, samples: np.ndarray) -> None:
    """A mono 16-bit WAV of ``samples`` in -1..1 (clipped there)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16).reshape(1, -1)
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=AUDIO_RATE, layout="mono")
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate, frame.pts = AUDIO_RATE, 0
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _cube() -> tuple[np.ndarray, np.ndarray]:
    corners = np.array(
        [[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)], np.float32
    )
    faces = [
        (0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
        (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3),
    ]  # fmt: skip
    return corners, np.array(faces, np.uint16).reshape(-1)


def _pyramid() -> tuple[np.ndarray, np.ndarray]:
    corners = np.array(
        [[-0.5, -0.5, -0.5], [0.5, -0.5, -0.5], [0.5, -0.5, 0.5], [-0.5, -0.5, 0.5], [0, 0.5, 0]],
        np.float32,
    )
    faces = [(0, 2, 1), (0, 3, 2), (0, 1, 4), (1, 2, 4), (2, 3, 4), (3, 0, 4)]
    return corners, np.array(faces, np.uint16).reshape(-1)


SHAPES: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "cube": _cube,
    "pyramid": _pyramid,
}


def glb_model(shape: str, colour: str) -> bytes:
    """A binary glTF holding one mesh of ``shape`` in a plain ``colour`` material."""
    positions, indices = SHAPES[shape]()
    position_bytes = positions.tobytes()
    index_bytes = indices.tobytes()
    index_bytes += b"\x00" * (-len(index_bytes) % 4)
    binary = position_bytes + index_bytes
    rgb = [channel / 255 for channel in COLOURS[colour]]
    document = {
        "asset": {"version": "2.0"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0}],
        "materials": [{"pbrMetallicRoughness": {"baseColorFactor": [*rgb, 1.0],
                                                "metallicFactor": 0.0, "roughnessFactor": 0.8}}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1,
                                    "material": 0}]}],
        "buffers": [{"byteLength": len(binary)}],
        "bufferViews": [
            {"buffer": 0, "byteOffset": 0, "byteLength": len(position_bytes), "target": 34962},
            {"buffer": 0, "byteOffset": len(position_bytes), "byteLength": indices.nbytes,
             "target": 34963},
        ],
        "accessors": [
            {"bufferView": 0, "componentType": 5126, "count": len(positions), "type": "VEC3",
             "min": positions.min(axis=0).tolist(), "max": positions.max(axis=0).tolist()},
            {"bufferView": 1, "componentType": 5123, "count": len(indices), "type": "SCALAR"},
        ],
    }  # fmt: skip
    json_chunk = json.dumps(document, separators=(",", ":")).encode()
    json_chunk += b" " * (-len(json_chunk) % 4)
    body = struct.pack("<I4s", len(json_chunk), b"JSON") + json_chunk
    body += struct.pack("<I4s", len(binary), b"BIN\x00") + binary
    return struct.pack("<4sII", b"glTF", 2, 12 + len(body)) + body


def _pair(pair_id: str, task: str, prompt: str, good: list, bad: list, flaw: str, a_is_good: bool):
    sides = (good, bad) if a_is_good else (bad, good)
    return {
        "id": pair_id,
        "task": task,
        "prompt_content": [["text", prompt]],
        "response_a": {"model_name": "demo-studio", "response_content": sides[0]},
        "response_b": {"model_name": "demo-sketch", "response_content": sides[1]},
        "criterion": "",
        "prompt_source": f"arbiter-demo/{task}",
        "prompt_metadata": {"flaw": flaw},
        "chosen": "A" if a_is_good else "B",
    }


def demo_media_write(out_dir: Path | str, *, seed: int = 7) -> Path:
    """Writes the demo's video, audio and 3D files under ``out_dir/media`` and their pairs to
    ``out_dir/media_pairs.jsonl`` (returned). A video already there is kept: an encoder may
    not give the same bytes twice, and loading the demo again must find its pairs as they
    were."""
    out = Path(out_dir)
    folder = out / "media"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pairs = []

    videos = [
        ("colour", "A red circle rolls from left to right.", "circle", _Clip("red"),
         _Clip("blue")),
        ("stutter", "A green square glides smoothly from left to right.", "square",
         _Clip("green"), _Clip("green", stutter=True)),
        ("direction", "A blue circle moves from left to right.", "circle", _Clip("blue"),
         _Clip("blue", direction=-1)),
    ]  # fmt: skip
    for flaw, prompt, shape, good, bad in videos:
        for quality, clip in (("good", good), ("bad", bad)):
            path = folder / f"video-{flaw}-{quality}.mp4"
            if not path.exists():
                video_write(path, clip, shape=shape)
        pairs.append(
            _pair(f"t2v-{flaw}", "t2v", prompt,
                  [["video", f"media/video-{flaw}-good.mp4"]],
                  [["video", f"media/video-{flaw}-bad.mp4"]], f"wrong {flaw}" if flaw != "stutter"
                  else "stutter", bool(rng.integers(2)))
        )  # fmt: skip

    tone = _tone(440.0)
    sounds = [
        ("pitch", "A clean 440 Hz tone (the A above middle C).", tone, _tone(523.25)),
        ("clipping", "A soft 440 Hz tone, without distortion.", tone, np.clip(tone * 6, -1, 1)),
        ("silence", "A 440 Hz tone for a second and a half.", tone, np.zeros_like(tone)),
    ]
    for flaw, prompt, good_samples, bad_samples in sounds:
        audio_write(folder / f"audio-{flaw}-good.wav", good_samples)
        audio_write(folder / f"audio-{flaw}-bad.wav", bad_samples)
        pairs.append(
            _pair(f"t2a-{flaw}", "t2a", prompt,
                  [["audio", f"media/audio-{flaw}-good.wav"]],
                  [["audio", f"media/audio-{flaw}-bad.wav"]], flaw, bool(rng.integers(2)))
        )  # fmt: skip

    models = [
        ("shape", "A red cube.", ("cube", "red"), ("pyramid", "red")),
        ("colour", "A green pyramid.", ("pyramid", "green"), ("pyramid", "blue")),
    ]
    for flaw, prompt, good_model, bad_model in models:
        (folder / f"model-{flaw}-good.glb").write_bytes(glb_model(*good_model))
        (folder / f"model-{flaw}-bad.glb").write_bytes(glb_model(*bad_model))
        pairs.append(
            _pair(f"t23d-{flaw}", "t23d", prompt,
                  [["model3d", f"media/model-{flaw}-good.glb"]],
                  [["model3d", f"media/model-{flaw}-bad.glb"]], f"wrong {flaw}",
                  bool(rng.integers(2)))
        )  # fmt: skip

    path = out / "media_pairs.jsonl"
    path.write_text("".join(json.dumps(pair) + "\n" for pair in pairs), encoding="utf-8")
    return path
