"""A decoded audio frame's samples as floats, and the waveform peaks gathered from them while
a file is checked (annotation/media/av_media.py): what an annotator's waveform shows."""

from __future__ import annotations

import itertools

import numpy as np

from annotation.media.loudness import FRAME_BATCH_SAMPLES

# Number of maxima kept for an audio track's waveform, and decimals kept of each.
WAVEFORM_PEAKS = 200
_PEAK_DECIMALS = 3
# Audio is summarised in blocks of this many seconds while decoding, then reduced to
# WAVEFORM_PEAKS: memory stays small whatever the length.
_PEAK_BLOCK_SECONDS = 0.01


class AudioPeaks:
    """The loudest |sample| per short block, across channels, gathered while decoding;
    frames are reduced ``FRAME_BATCH_SAMPLES`` samples at a time (the blocks, and so the
    peaks, are those frame by frame gives)."""

    def __init__(self, sample_rate: int):
        self.block = max(1, int(sample_rate * _PEAK_BLOCK_SECONDS))
        self.blocks: list[float] = []
        self.pending = np.zeros(0, dtype=np.float32)
        self.frames: list[np.ndarray] = []
        self.frame_samples = 0

    def add(self, samples: np.ndarray) -> None:
        """``samples``: a frame's ``to_ndarray()`` as floats in -1..1."""
        if self.frames and self.frames[0].shape[0] != samples.shape[0]:
            self._flush()  # the layout changed: frames of each are reduced on their own
        self.frames.append(samples)
        self.frame_samples += samples.shape[-1]
        if self.frame_samples >= FRAME_BATCH_SAMPLES:
            self._flush()

    def _flush(self) -> None:
        if not self.frames:
            return
        values = np.abs(np.concatenate(self.frames, axis=-1))
        self.frames, self.frame_samples = [], 0
        # Planar layouts are (channels, samples); packed ones (1, samples * channels).
        mono = values.max(axis=0) if values.ndim == 2 else values
        data = np.concatenate([self.pending, mono])
        whole = len(data) // self.block * self.block
        if whole:
            self.blocks.extend(data[:whole].reshape(-1, self.block).max(axis=1).tolist())
        self.pending = data[whole:]

    def reduced(self) -> list[float]:
        self._flush()
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


# FFmpeg's sample formats (less the planar "p") that ``to_ndarray`` knows: the NumPy type,
# and the offset and scale that ``_as_float`` takes them to -1..1 with.
_SAMPLE_TYPES: dict[str, tuple[type[np.generic], float, float]] = {
    "u8": (np.uint8, 128.0, 128.0),
    "s16": (np.int16, 0.0, float(np.iinfo(np.int16).max)),
    "s32": (np.int32, 0.0, float(np.iinfo(np.int32).max)),
    "s64": (np.int64, 0.0, float(np.iinfo(np.int64).max)),
    "flt": (np.float32, 0.0, 1.0),
    "dbl": (np.float64, 0.0, 1.0),
}


def frame_samples(frame) -> np.ndarray:
    """``_as_float(frame.to_ndarray())``, shaped as that is ((channels, samples) for a planar
    format, (1, samples x channels) for a packed one), each plane written straight into one
    float array rather than stacked first: PyAV's ``vstack`` of the planes cost more than
    the conversion, on every frame of every clip."""
    fmt = frame.format
    known = _SAMPLE_TYPES.get(fmt.name.removesuffix("p"))
    if known is None:
        return _as_float(frame.to_ndarray())
    kind, offset, scale = known
    planes = frame.planes
    count = frame.samples if fmt.is_planar else frame.samples * frame.layout.nb_channels
    out = np.empty((len(planes), count), dtype=np.float32)
    for row, plane in zip(out, planes, strict=True):
        row[:] = np.frombuffer(plane, dtype=kind, count=count)
    if offset:
        out -= offset
    if scale != 1.0:
        out /= scale
    return out


def _as_float(samples: np.ndarray) -> np.ndarray:
    if samples.dtype.kind == "f":
        return samples.astype(np.float32, copy=False)
    if samples.dtype.kind == "u":
        bits = samples.dtype.itemsize * 8
        return (samples.astype(np.float32) - 2 ** (bits - 1)) / 2 ** (bits - 1)
    return samples.astype(np.float32) / float(np.iinfo(samples.dtype).max)
