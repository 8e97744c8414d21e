"""Opening a file to check it (annotation/media/av_media.py, ``av_open_input``): a 16-bit PCM
WAV's samples are not run through every codec prober first (docs/operations.md, "Import
speed")."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import av
import numpy as np
import pytest

from annotation.media import av_media
from annotation.media.av_media import av_inspect, av_open_input
from tests.annotation.media.conftest import audio_write


def _fastest(open_file, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        open_file().close()
        times.append(time.perf_counter() - started)
    return min(times)


def _cd_wav(path: Path, seconds: int) -> Path:
    """A 44.1 kHz stereo 16-bit WAV, as a CD's audio is (and as DTS carried as PCM is)."""
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=44100, layout="stereo")
        t = np.arange(44100) / 44100
        second = (np.sin(2 * np.pi * 440 * t) * 8000).astype(np.int16)
        data = np.repeat(second, 2).reshape(1, -1)
        for n in range(seconds):
            frame = av.AudioFrame.from_ndarray(data, format="s16", layout="stereo")
            frame.sample_rate, frame.pts = 44100, n * 44100
            for packet in stream.encode(frame):
                container.mux(packet)
    return path


def test_a_long_wav_opens_without_its_samples_being_probed(tmp_path):
    """FFmpeg runs its codec probers over the first 32 packets of a 16-bit WAV's samples,
    looking for DTS or AC-3 carried as PCM (about 20 ms for this one); its header says all
    we need, so the open costs a small fraction of that."""
    path = _cd_wav(tmp_path / "long.wav", seconds=30)
    start = path.read_bytes()[:512]
    ours = _fastest(lambda: av_open_input(path, start))
    default = _fastest(lambda: av.open(str(path)))
    assert ours * 10 < default, (ours, default)


@pytest.mark.parametrize("make", ["cd", "mono"])
def test_what_is_measured_of_a_wav_is_what_a_full_probe_gives(tmp_path, monkeypatch, make):
    if make == "cd":
        path, rate, channels = _cd_wav(tmp_path / "tone.wav", seconds=3), 44100, 2
    else:
        path, rate, channels = audio_write(tmp_path / "tone.wav", seconds=3), 16000, 1
    ours = av_inspect(path, kind="audio")
    monkeypatch.setattr(av_media, "av_open_input", lambda p, start: av.open(str(p)))
    probed = av_inspect(path, kind="audio")
    assert dataclasses.asdict(ours) == dataclasses.asdict(probed)
    assert (ours.duration_seconds, ours.sample_rate, ours.channels) == (3.0, rate, channels)
    assert ours.peaks
    assert ours.loudness_lufs is not None


def test_a_file_that_only_calls_itself_a_wav_is_still_refused(tmp_path):
    path: Path = tmp_path / "fake.wav"
    path.write_bytes(b"RIFF\x24\x00\x00\x00WAVEjunk" + bytes(2000))
    with pytest.raises(av_media.AvMediaError, match=r"cannot be read as audio \(corrupt"):
        av_inspect(path, kind="audio")
