"""Integrated loudness (ITU-R BS.1770-4, EBU R 128) against hand-worked cases and EBU Tech
3341's test signals, and as an import measures it from a decoded file."""

from __future__ import annotations

import math

import av
import numpy as np
import pytest

from annotation.imports.importer import pairs_import
from annotation.media.loudness import LoudnessMeter, integrated_loudness, k_weighting
from annotation.models import Media
from tests.annotation.imports.conftest import text_pair, write_jsonl

RATE = 48000


def sine(seconds: float, dbfs: float, *, frequency: float = 997.0, rate: int = RATE):
    t = np.arange(int(seconds * rate)) / rate
    return 10 ** (dbfs / 20) * np.sin(2 * np.pi * frequency * t)


def test_the_k_weighting_at_48_khz_is_the_standards_table():
    # BS.1770-4, Annex 1, Tables 1 and 2.
    shelf, high_pass = k_weighting(48000)
    assert shelf == pytest.approx(
        [1.53512485958697, -2.69169618940638, 1.19839281085285, 1, -1.69065929318241,
         0.73248077421585], abs=1e-10,
    )  # fmt: skip
    assert high_pass == pytest.approx([1, -2, 1, 1, -1.99004745483398, 0.99007225036621], abs=1e-10)


def test_a_full_scale_sine_in_one_front_channel_reads_minus_3_01():
    # The standard's own definition of the -0.691 offset: a 0 dBFS 997 Hz sine in the left
    # channel (mean square 0.5, -3.01 dB; K-weighting adds 0.691 dB, the offset removes it).
    left = sine(5, 0)
    stereo = np.vstack([left, np.zeros_like(left)])
    assert integrated_loudness(stereo, sample_rate=RATE, channels=["FL", "FR"]) == pytest.approx(
        -3.01, abs=0.01
    )
    # In both channels, the powers add: 3.01 dB more.
    both = np.vstack([left, left])
    assert integrated_loudness(both, sample_rate=RATE, channels=["FL", "FR"]) == pytest.approx(
        0.0, abs=0.01
    )


@pytest.mark.parametrize("rate", [48000, 44100, 16000])
def test_a_mono_sine_at_minus_20_dbfs_reads_minus_23_01_at_any_rate(rate):
    # Mean square 0.01 / 2: 10 log10(0.005) = -23.01 dB, and the K-weighting at 997 Hz is
    # cancelled by the offset. Away from 48 kHz the bilinear transform bends the filter a
    # little near the top of the band: 0.04 dB at 16 kHz.
    value = integrated_loudness(sine(5, -20, rate=rate), sample_rate=rate)
    assert value == pytest.approx(10 * math.log10(0.005), abs=0.05)


def test_ebu_tech_3341_cases_1_and_2_stereo_1_khz_sines():
    for dbfs in (-23, -33):
        tone = sine(20, dbfs, frequency=1000)
        value = integrated_loudness(np.vstack([tone, tone]), sample_rate=RATE)
        assert value == pytest.approx(dbfs, abs=0.1)


def test_ebu_tech_3341_cases_3_to_5_the_gates():
    def stereo(*pieces):
        tone = np.concatenate([sine(seconds, dbfs, frequency=1000) for seconds, dbfs in pieces])
        return np.vstack([tone, tone])

    # Case 3: the -36 dBFS parts are more than 10 LU under the rest (relative gate).
    assert integrated_loudness(
        stereo((10, -36), (60, -23), (10, -36)), sample_rate=RATE
    ) == pytest.approx(-23, abs=0.1)
    # Case 4: the -72 dBFS parts are under -70 LUFS (absolute gate).
    assert integrated_loudness(
        stereo((10, -72), (10, -36), (60, -23), (10, -36), (10, -72)), sample_rate=RATE
    ) == pytest.approx(-23, abs=0.1)
    # Case 5: nothing gated; the mean power of -26, -20 and -26 dBFS.
    assert integrated_loudness(
        stereo((20, -26), (20.1, -20), (20, -26)), sample_rate=RATE
    ) == pytest.approx(-23, abs=0.1)


def test_ebu_tech_3341_case_6_five_channels_with_the_surround_weights():
    tones = {"FL": -28, "FR": -28, "FC": -24, "SL": -30, "SR": -30}
    samples = np.vstack([sine(20, dbfs, frequency=1000) for dbfs in tones.values()])
    value = integrated_loudness(samples, sample_rate=RATE, channels=list(tones))
    assert value == pytest.approx(-23, abs=0.1)
    # The LFE counts for nothing.
    with_lfe = np.vstack([samples, sine(20, 0, frequency=50)])
    assert integrated_loudness(
        with_lfe, sample_rate=RATE, channels=[*tones, "LFE"]
    ) == pytest.approx(value, abs=1e-9)


def test_silence_and_sound_under_400_ms_have_no_figure():
    assert integrated_loudness(np.zeros(RATE * 2), sample_rate=RATE) is None
    assert integrated_loudness(sine(0.39, -20), sample_rate=RATE) is None


def test_fed_in_pieces_it_reads_as_fed_at_once():
    tone = np.vstack([sine(7.3, -18), sine(7.3, -25, frequency=300)])
    meter = LoudnessMeter(sample_rate=RATE, channels=["FL", "FR"])
    for start in range(0, tone.shape[1], 1023):
        meter.add(tone[:, start : start + 1023])
    assert meter.integrated() == pytest.approx(
        integrated_loudness(tone, sample_rate=RATE), abs=1e-9
    )


def test_decoded_frames_gathered_in_batches_read_as_fed_at_once():
    """An import's meter filters many frames at once; the figure is the one of the whole
    signal, packed (interleaved) or planar, and a layout change midway gives no figure."""
    from annotation.media.loudness import FrameLoudness

    tone = np.vstack([sine(7.3, -18), sine(7.3, -25, frequency=300)]).astype(np.float32)
    expected = round(integrated_loudness(tone, sample_rate=RATE, channels=["FL", "FR"]), 2)
    for fmt in ("fltp", "flt"):
        meter = FrameLoudness()
        for start in range(0, tone.shape[1], 1152):
            piece = np.ascontiguousarray(tone[:, start : start + 1152])
            data = piece if fmt == "fltp" else piece.T.reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(data, format=fmt, layout="stereo")
            frame.sample_rate = RATE
            meter.add(frame, frame.to_ndarray())
        assert meter.integrated() == pytest.approx(expected, abs=0.011)
    mono = av.AudioFrame.from_ndarray(tone[:1, :1152], format="fltp", layout="mono")
    mono.sample_rate = RATE
    meter.add(mono, mono.to_ndarray())
    assert meter.integrated() is None


@pytest.mark.django_db
def test_an_import_stores_each_audio_files_loudness(project, tmp_path):
    # A stereo WAV of a -20 dBFS sine in both channels (its samples interleaved) reads
    # -23.01 + 3.01; a mono FLAC at -30 dBFS reads -33.01.
    files = {"loud.wav": ("pcm_s16le", "stereo", -20), "quiet.flac": ("flac", "mono", -30)}
    for name, (codec, layout, dbfs) in files.items():
        with av.open(str(tmp_path / name), "w") as container:
            stream = container.add_stream(codec, rate=RATE)
            stream.layout = layout
            channels = 2 if layout == "stereo" else 1
            tone = (sine(3, dbfs) * 32767).astype(np.int16)
            data = np.repeat(tone, channels).reshape(1, -1)
            for start in range(0, data.shape[1], 4096 * channels):
                frame = av.AudioFrame.from_ndarray(
                    data[:, start : start + 4096 * channels], format="s16", layout=layout
                )
                frame.sample_rate = RATE
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
    pair = text_pair("loud-1", task="t2a")
    pair["response_a"]["response_content"] = [["audio", "loud.wav"]]
    pair["response_b"]["response_content"] = [["audio", "quiet.flac"]]
    pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", [pair]), media_root=tmp_path
    )
    figures = sorted(Media.objects.filter(kind="audio").values_list("loudness_lufs", flat=True))
    assert figures == [pytest.approx(-33.01, abs=0.05), pytest.approx(-20.0, abs=0.05)]


def test_the_filter_kernel_gives_scipy_signals_sosfilt_bit_for_bit_in_pieces():
    """The meter runs SciPy's compiled kernel without the rest of ``scipy.signal``: fed a
    track in uneven pieces, the state carried over, it gives what ``sosfilt`` gives for the
    whole track at once, to the last bit."""
    from scipy.signal import sosfilt  # type: ignore[import-untyped]

    from annotation.media.loudness import sos_kernel

    rng = np.random.default_rng(3)
    track = rng.standard_normal((2, 50_000)) * 0.3
    sos = k_weighting(44100)
    expected = sosfilt(sos, track, axis=-1)
    state = np.zeros((2, sos.shape[0], 2))
    pieces = []
    for start, end in [(0, 1152), (1152, 17536), (17536, 17537), (17537, 50_000)]:
        piece = np.array(track[:, start:end], order="C")
        sos_kernel()(sos, piece, state)
        pieces.append(piece)
    assert np.array_equal(np.concatenate(pieces, axis=1), expected)
    meter = LoudnessMeter(sample_rate=44100, channels=["FL", "FR"])
    for start in range(0, 50_000, 7_000):
        meter.add(track[:, start : start + 7_000])
    assert meter.integrated() == integrated_loudness(track, sample_rate=44100)


def test_without_scipys_own_kernel_the_meter_falls_back_to_sosfilt(monkeypatch):
    """A SciPy whose compiled routine moved: the meter filters through the public
    ``sosfilt``, to the same figures, rather than failing every audio import."""
    from annotation.media import loudness

    def moved():
        raise ImportError("no _sosfilt extension")

    rng = np.random.default_rng(5)
    track = rng.standard_normal((2, 30_000)) * 0.3
    expected = LoudnessMeter(sample_rate=44100, channels=["FL", "FR"])
    expected.add(track)
    monkeypatch.setattr(loudness, "_private_sos_kernel", moved)
    loudness.sos_kernel.cache_clear()
    try:
        assert loudness.sos_kernel() is loudness._public_sos_kernel
        meter = LoudnessMeter(sample_rate=44100, channels=["FL", "FR"])
        for start in range(0, 30_000, 4_000):
            meter.add(track[:, start : start + 4_000])
        assert meter.integrated() == expected.integrated()
        assert np.array_equal(meter.state, expected.state)
    finally:
        loudness.sos_kernel.cache_clear()


def test_the_media_server_measures_loudness_without_loading_scipy_signal(settings):
    """What the media server loads, every bounded child's fork copies the page tables of:
    the loudness filter comes without ``scipy.signal`` (and its linear algebra, special
    functions and FFT, about 60 MB)."""
    from annotation.media.bounded import bounded_call

    loaded = bounded_call(_loaded_after_a_meter, kind="audio")
    assert loaded == {"meter": True, "scipy.signal": False}


def _loaded_after_a_meter() -> dict[str, bool]:
    import sys

    meter = LoudnessMeter(sample_rate=RATE, channels=["FC"])
    meter.add(np.atleast_2d(sine(1.0, -20)))
    return {"meter": meter.integrated() is not None, "scipy.signal": "scipy.signal" in sys.modules}
