"""Integrated loudness of an audio track, as ITU-R BS.1770-4 and EBU R 128 define it, in LUFS
(LKFS): each channel K-weighted (a high-shelf "head" filter, then a high-pass), its mean square
taken over 400 ms blocks overlapping by 75%, the channels summed with their weights (1 for
left, right and centre, 1.41 for the surround channels, 0 for the LFE), and the blocks gated
twice: those at or under -70 LUFS are left out (absolute gate), then those more than 10 LU
under the loudness of the rest (relative gate). The figure is -0.691 + 10 log10 of the mean
weighted power of the blocks kept; the -0.691 makes a full-scale 997 Hz sine in one front
channel read -3.01 LUFS (its mean square, 0.5, is -3.01 dB; the K-weighting lifts 997 Hz by
0.691 dB).

The meter is fed decoded samples in pieces, as they come out of the decoder, and keeps only
its filter state and one power figure per 100 ms, so a long file is never held in memory.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

# BS.1770-4, Annex 1: block length and the step between blocks (75% overlap), in seconds.
_BLOCK_SECONDS = 0.4
_STEPS_PER_BLOCK = 4
ABSOLUTE_GATE_LUFS = -70.0
RELATIVE_GATE_LU = -10.0
_OFFSET = -0.691
# Channel weights by FFmpeg's channel names: the LFE is left out, the surround channels count
# 1.41 (+1.5 dB); every other channel (left, right, centre, and those the standard does not
# name) counts 1.
_CHANNEL_WEIGHTS = {"LFE": 0.0, "LFE2": 0.0, "SL": 1.41, "SR": 1.41, "BL": 1.41, "BR": 1.41}


def k_weighting(sample_rate: int) -> np.ndarray:
    """The K-weighting filter at ``sample_rate`` as two second-order sections (scipy's
    ``sos`` layout). BS.1770 tabulates the coefficients at 48 kHz only; these come from the
    analogue prototypes behind that table (the derivation libebur128 uses), bilinear-
    transformed at the rate given, and equal the table at 48 kHz."""
    # Stage 1, the head's high shelf: +4 dB above about 1.7 kHz.
    k = math.tan(math.pi * 1681.974450955533 / sample_rate)
    q = 0.7071752369554196
    vh = 10 ** (3.999843853973347 / 20)
    vb = vh**0.4996667741545416
    a0 = 1 + k / q + k * k
    shelf = [
        (vh + vb * k / q + k * k) / a0,
        2 * (k * k - vh) / a0,
        (vh - vb * k / q + k * k) / a0,
        1.0,
        2 * (k * k - 1) / a0,
        (1 - k / q + k * k) / a0,
    ]
    # Stage 2, the RLB high-pass at about 38 Hz.
    k = math.tan(math.pi * 38.13547087602444 / sample_rate)
    q = 0.5003270373238773
    a0 = 1 + k / q + k * k
    high_pass = [1.0, -2.0, 1.0, 1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0]
    return np.array([shelf, high_pass])


@functools.cache
def sos_kernel() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    """SciPy's compiled filter of second-order sections, ``kernel(sos, x, zi)``: filters
    ``x`` (float64, C order, shaped (signals, samples)) in place, its state ``zi`` (shaped
    (signals, sections, 2)) carried over; what ``scipy.signal.sosfilt`` runs once it has
    checked and reshaped its arguments (tests/annotation/media/test_loudness.py holds them to
    the same figures). Loaded from its own file on first use, not with this module (imported
    wherever media are: a release build, every web process), and without the rest of
    ``scipy.signal``: that package loads SciPy's linear algebra, special functions and FFT,
    about 60 MB, which would sit in the media server and make every bounded child's fork
    copy their page tables (docs/import-format.md, "Video and audio"). The routine is
    SciPy's own, not its public API: a SciPy without it (moved, renamed) gets
    ``sosfilt`` itself, the same figures at the cost of loading ``scipy.signal``."""
    try:
        return _private_sos_kernel()
    except (ImportError, OSError, AttributeError, ValueError):
        return _public_sos_kernel


def _private_sos_kernel() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None]:
    # scipy ships no type hints; mypy asks for scipy-stubs whatever the overrides say.
    import scipy  # type: ignore[import-untyped]

    name = "scipy.signal._sosfilt"
    module = sys.modules.get(name)
    if module is None:
        folder = Path(scipy.__file__).parent / "signal"
        found = [
            folder / f"_sosfilt{suffix}"
            for suffix in importlib.machinery.EXTENSION_SUFFIXES
            if (folder / f"_sosfilt{suffix}").exists()
        ]
        if not found:
            raise ImportError(f"no _sosfilt extension in {folder}")
        spec = importlib.util.spec_from_file_location(name, found[0])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {found[0]}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # The one copy: scipy.signal, if something imports it later, finds this one.
        sys.modules[name] = module
    return module._sosfilt


def _public_sos_kernel(sos: np.ndarray, x: np.ndarray, zi: np.ndarray) -> None:
    """The kernel's contract through ``scipy.signal.sosfilt``, whose state is shaped
    (sections, signals, 2)."""
    from scipy.signal import sosfilt  # type: ignore[import-untyped]

    filtered, state = sosfilt(sos, x, axis=-1, zi=zi.transpose(1, 0, 2))
    x[...] = filtered
    zi[...] = state.transpose(1, 0, 2)


def channel_weight(name: str) -> float:
    return _CHANNEL_WEIGHTS.get(name, 1.0)


class LoudnessMeter:
    """Integrated loudness, fed in pieces: ``add`` takes float samples shaped (channels,
    samples) in -1..1; ``integrated`` gives LUFS, or None when no block passes the gates
    (silence, or less than 400 ms of sound)."""

    def __init__(self, *, sample_rate: int, channels: list[str]):
        if sample_rate <= 0 or not channels:
            raise ValueError("a loudness meter needs a sample rate and at least one channel")
        self._sosfilt = sos_kernel()
        self.channels = len(channels)
        self.weights = np.array([channel_weight(name) for name in channels])
        self.sos = k_weighting(sample_rate)
        # Each channel's filter state, section by section (the kernel's layout).
        self.state = np.zeros((self.channels, self.sos.shape[0], 2))
        self.step = max(1, round(sample_rate * _BLOCK_SECONDS / _STEPS_PER_BLOCK))
        # The weighted sum of squares of each whole 100 ms step, and the samples of the step
        # not yet whole.
        self.steps: list[float] = []
        self.pending = np.zeros(0)

    def add(self, samples: np.ndarray) -> None:
        if samples.ndim != 2 or samples.shape[0] != self.channels:
            raise ValueError(
                f"expected samples shaped ({self.channels}, n), got {tuple(samples.shape)}"
            )
        filtered = np.array(samples, dtype=np.float64, order="C")  # filtered in place
        self._sosfilt(self.sos, filtered, self.state)
        power = self.weights @ np.square(filtered)
        data = np.concatenate([self.pending, power])
        whole = len(data) // self.step * self.step
        if whole:
            self.steps.extend(data[:whole].reshape(-1, self.step).sum(axis=1).tolist())
        self.pending = data[whole:]

    def integrated(self) -> float | None:
        steps = np.asarray(self.steps)
        if len(steps) < _STEPS_PER_BLOCK:
            return None
        window = np.convolve(steps, np.ones(_STEPS_PER_BLOCK), mode="valid")
        blocks = window / (self.step * _STEPS_PER_BLOCK)
        with np.errstate(divide="ignore"):
            loudness = _OFFSET + 10 * np.log10(blocks)
        kept = blocks[loudness > ABSOLUTE_GATE_LUFS]
        if not len(kept):
            return None
        relative_gate = _OFFSET + 10 * math.log10(kept.mean()) + RELATIVE_GATE_LU
        kept = blocks[(loudness > ABSOLUTE_GATE_LUFS) & (loudness > relative_gate)]
        return _OFFSET + 10 * math.log10(kept.mean())


def integrated_loudness(
    samples: np.ndarray, *, sample_rate: int, channels: list[str] | None = None
) -> float | None:
    """Integrated loudness of float samples shaped (channels, samples), all at once;
    ``channels`` are FFmpeg's channel names (default: front channels, weight 1)."""
    samples = np.atleast_2d(samples)
    names = channels or [f"C{index}" for index in range(samples.shape[0])]
    meter = LoudnessMeter(sample_rate=sample_rate, channels=names)
    meter.add(samples)
    return meter.integrated()


# Samples a frame meter gathers before filtering them at once: a decoder's frames hold 1,024
# or 1,152 samples, and each call of the filter costs more than filtering a frame's samples
# (docs/operations.md, "Import speed").
FRAME_BATCH_SAMPLES = 16384


class FrameLoudness:
    """A track's meter fed PyAV audio frames: made at the first frame, which names the
    channels; a track whose layout or rate changes midway gets no figure. Frames are
    filtered ``FRAME_BATCH_SAMPLES`` at a time (the filter's state carries over, so the
    figure is the one frame by frame gives)."""

    def __init__(self):
        self.meter: LoudnessMeter | None = None
        self.rate = 0
        self.names: list[str] = []
        self.failed = False
        self.pending: list[np.ndarray] = []
        self.pending_samples = 0

    def add(self, frame, samples: np.ndarray) -> None:
        """``samples``: the frame's ``to_ndarray()`` as floats in -1..1."""
        if self.failed:
            return
        names = [channel.name for channel in frame.layout.channels]
        if not frame.format.is_planar:
            samples = samples.reshape(-1, len(names)).T  # packed: channels interleaved
        try:
            if self.meter is None:
                self.meter = LoudnessMeter(sample_rate=frame.sample_rate, channels=names)
                self.rate, self.names = frame.sample_rate, names
            if frame.sample_rate != self.rate or names != self.names:
                raise ValueError("the sample rate or the channels changed")
            if samples.ndim != 2 or samples.shape[0] != len(names):
                raise ValueError(f"samples shaped {tuple(samples.shape)}")
        except ValueError:
            self.failed = True
            return
        self.pending.append(samples)
        self.pending_samples += samples.shape[1]
        if self.pending_samples >= FRAME_BATCH_SAMPLES:
            self._flush()

    def _flush(self) -> None:
        if self.pending and self.meter is not None:
            self.meter.add(np.concatenate(self.pending, axis=1))
        self.pending, self.pending_samples = [], 0

    def integrated(self) -> float | None:
        """LUFS to two decimals, or None (silence, under 400 ms, or a changing layout)."""
        if self.failed or self.meter is None:
            return None
        self._flush()
        value = self.meter.integrated()
        return None if value is None else round(value, 2)
