"""Video and audio pairs for judge tests, imported as a curator would (PyAV-made files through
``pairs_import``), and what a judge request carried."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import av
import numpy as np
from PIL import Image

from annotation.imports.importer import pairs_import
from annotation.models import Pair
from tests.annotation.imports.conftest import text_pair, write_jsonl

# A grey video's frame n is uniformly this many levels times n, so a frame shows its index.
GREY_STEP = 6


def grey_video(path: Path, *, frames: int = 40, rate: int = 10, step: int = GREY_STEP) -> Path:
    """An H.264 MP4 whose frame n (of ``frames`` at ``rate`` fps) is uniform grey n * step
    (step 0: a still video)."""
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        for index in range(frames):
            pixels = np.full((64, 96, 3), 16 + index * step, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def silent_wav(path: Path, *, seconds: float = 0.2, rate: int = 16000) -> Path:
    """A WAV of digital silence."""
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, int(rate * seconds)), np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def frame_index(data_url: str) -> int:
    """Which frame of a ``grey_video`` a JPEG data URL shows."""
    image = Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1])))
    return round((float(np.asarray(image.convert("L")).mean()) - 16) / GREY_STEP)


def import_pairs(project, tmp_path: Path, pairs: list[dict]) -> list[Pair]:
    """Imports ``pairs`` (media paths relative to ``tmp_path``); returns them in order."""
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", pairs), media_root=tmp_path
    )
    by_id = {p.external_id: p for p in Pair.objects.filter(project=project)}
    return [by_id[pair["id"]] for pair in pairs]


def media_pair(pair_id: str, task: str, first: list, second: list, prompt: list | None = None):
    """A pair whose responses are the given import-format parts."""
    pair = text_pair(pair_id, task=task)
    if prompt is not None:
        pair["prompt_content"] = prompt
    pair["response_a"]["response_content"] = first
    pair["response_b"]["response_content"] = second
    return pair


def input_audio_parts(request) -> list[dict]:
    """The ``input_audio`` values of a fake server's request."""
    return [p["input_audio"] for p in request.content_parts if p.get("type") == "input_audio"]


def decoded_audio(part: dict) -> tuple[int, int, np.ndarray]:
    """(sample rate, channels, mono samples in -1..1) of an ``input_audio`` value."""
    data = base64.b64decode(part["data"])
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        rate, channels = stream.codec_context.sample_rate, stream.codec_context.channels
        chunks = [frame.to_ndarray() for frame in container.decode(stream)]
    samples = np.concatenate([c.reshape(-1) for c in chunks])
    if samples.dtype == np.int16:
        samples = samples.astype(np.float32) / 32768.0
    return rate, channels, samples
