"""The served copy of a video or audio file is rebuilt from its decoded frames and samples
(``annotation.media.av_media``): an adversarial corpus, generated here, plants a model name in
every place a file can hide one, and the served bytes hold it in no form; files of the same
content in different formats come out alike; bombs are refused within their limits; mutated
files are refused or rebuilt, never crash (docs/import-format.md, "What a served video or
audio clip keeps")."""

from __future__ import annotations

import io
import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from annotation.media.av_media import AvPrepared, av_prepare
from annotation.media.av_probe import AvMediaError, av_limits
from tests.annotation.media.conftest import (
    PLANTED,
    assert_no_planted,
    audio_write,
    video_write,
)

# What an encoder or muxer writes of its own name: none of it may be served.
ENCODER_STRINGS = (b"x264", b"LAME", b"Lavf", b"Lavc", b"Lavu")


def prepare(path: Path, kind: str, **limits) -> AvPrepared:
    return av_prepare(path, kind=kind, staging=path.parent, limits={**av_limits(), **limits})


def served_bytes(path: Path, kind: str) -> bytes:
    prepared = prepare(path, kind)
    assert prepared.served is not None, prepared.error
    return prepared.served.read_bytes()


# The corpus: a model name in each place it can hide ---------------------------------------


def _frames(container, stream, count: int = 3) -> None:
    for index in range(count):
        pixels = np.full((stream.height, stream.width, 3), index * 40 % 256, np.uint8)
        for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def _video_stream(container, codec: str = "libvpx-vp9", rate: int = 10):
    stream = container.add_stream(codec, rate=rate)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    return stream


def mkv_chapters_and_attachment(folder: Path) -> Path:
    path = folder / "chapters.mkv"
    with av.open(str(path), "w", format="matroska") as container:
        video = _video_stream(container)
        container.set_chapters(
            [{"id": 1, "start": 0, "end": 2, "time_base": Fraction(1, 10),
              "metadata": {"title": PLANTED}}]
        )  # fmt: skip
        container.add_attachment(name="about.txt", mimetype="text/plain", data=PLANTED.encode())
        _frames(container, video)
    return path


def mkv_subtitles(folder: Path) -> Path:
    subtitles = folder / "s.srt"
    subtitles.write_text(f"1\n00:00:00,000 --> 00:00:00,300\n{PLANTED}\n\n")
    path = folder / "subtitled.mkv"
    with av.open(str(subtitles)) as source, av.open(str(path), "w", format="matroska") as out:
        video = _video_stream(out)
        text = out.add_stream_from_template(source.streams[0])
        for packet in source.demux(source.streams[0]):
            if packet.size:
                packet.stream = text
                out.mux(packet)
        _frames(out, video)
    return path


def ts_data_stream(folder: Path) -> Path:
    """MPEG-TS with a timed ID3 data stream beside H.264 (x264's options SEI in it too)."""
    path = folder / "data.ts"
    with av.open(str(path), "w", format="mpegts") as container:
        video = _video_stream(container, "libx264")
        data = container.add_data_stream("timed_id3")
        _frames(container, video)
        packet = av.Packet(b"ID3" + PLANTED.encode())
        packet.stream, packet.pts, packet.dts = data, 0, 0
        packet.time_base = Fraction(1, 90000)
        container.mux(packet)
    return path


def id3v1(title: str) -> bytes:
    field = title.encode()[:30].ljust(30, b"\0")
    return b"TAG" + field + field + field + b"2026" + field + b"\x0c"


def ape_tag(value: str) -> bytes:
    item = struct.pack("<II", len(value), 0) + b"Title\0" + value.encode()
    footer = b"APETAGEX" + struct.pack("<IIII", 2000, len(item) + 32, 1, 0) + bytes(8)
    return item + footer


def mp3_tags(folder: Path) -> Path:
    """ID3v2 (the muxer's), the LAME/Xing header, then an APE tag and the 128-byte ID3v1 tag,
    where taggers put them."""
    path = audio_write(folder / "tagged.mp3", fmt="mp3", seconds=0.5)
    path.write_bytes(path.read_bytes() + ape_tag(PLANTED) + id3v1(PLANTED))
    return path


def mp3_stray_bytes_then_id3v1(folder: Path) -> Path:
    """The tester's case: a few stray bytes between the last frame and the ID3v1 tag, which
    the demuxer then hands on as a packet of its own."""
    path = audio_write(folder / "stray.mp3", fmt="mp3", seconds=0.5)
    path.write_bytes(path.read_bytes() + b"\x00\x17\x2a" + id3v1(PLANTED))
    return path


def wav_info_and_trailer(folder: Path) -> Path:
    path = audio_write(folder / "info.wav", fmt="wav")
    path.write_bytes(path.read_bytes() + b"LIST" + PLANTED.encode() * 3)
    return path


def m4a_itunes(folder: Path) -> Path:
    path = folder / "itunes.m4a"
    with av.open(str(path), "w", format="ipod") as container:
        for tag in ("title", "artist", "comment", "encoder", "album"):
            container.metadata[tag] = PLANTED
        stream = container.add_stream("aac", rate=48000)
        stream.metadata["handler_name"] = PLANTED
        samples = (0.3 * np.sin(np.arange(9600) / 48000 * 2 * np.pi * 440)).astype(np.float32)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="fltp", layout="mono")
        frame.sample_rate, frame.pts = 48000, 0
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    return path


CORPUS = {
    "mp4-tags-handler-x264": ("video", lambda folder: video_write(folder / "tagged.mp4")),
    "webm-tags": (
        "video",
        lambda folder: video_write(folder / "tagged.webm", fmt="webm", codec="libvpx-vp9"),
    ),
    "mkv-chapters-attachment": ("video", mkv_chapters_and_attachment),
    "mkv-subtitles": ("video", mkv_subtitles),
    "ts-data-stream": ("video", ts_data_stream),
    "mp3-id3v2-lame-ape-id3v1": ("audio", mp3_tags),
    "mp3-stray-bytes-id3v1": ("audio", mp3_stray_bytes_then_id3v1),
    "wav-info-trailing": ("audio", wav_info_and_trailer),
    "ogg-vorbis-comments": ("audio", lambda folder: audio_write(folder / "c.ogg", fmt="ogg")),
    "flac-vorbis-comments": ("audio", lambda folder: audio_write(folder / "c.flac", fmt="flac")),
    "m4a-itunes-atoms": ("audio", m4a_itunes),
}


@pytest.mark.parametrize("case", list(CORPUS))
def test_no_planted_name_nor_encoder_string_is_served(tmp_path, case):
    kind, make = CORPUS[case]
    path = make(tmp_path)
    source = path.read_bytes()
    assert PLANTED.encode() in source or PLANTED.encode("utf-16-le") in source
    served = served_bytes(path, kind)
    assert_no_planted(served)
    for name in ENCODER_STRINGS:
        assert name not in served, f"{name!r} served"


def test_the_corpus_hides_what_it_says(tmp_path):
    """The corpus is hostile: the x264 and LAME strings, a subtitle, data and attachment
    stream, chapters and the ID3v1 tag after stray bytes are all in the sources."""
    assert b"x264" in ts_data_stream(tmp_path).read_bytes()
    mp3 = mp3_tags(tmp_path).read_bytes()
    assert b"LAME" in mp3 or b"Lavc" in mp3
    assert mp3[-128:].startswith(b"TAG")
    assert b"APETAGEX" in mp3
    with av.open(str(mkv_subtitles(tmp_path))) as container:
        assert "subtitle" in [stream.type for stream in container.streams]
    with av.open(str(ts_data_stream(tmp_path))) as container:
        assert "data" in [stream.type for stream in container.streams]
    with av.open(str(mkv_chapters_and_attachment(tmp_path))) as container:
        assert container.chapters()
        assert "attachment" in [stream.type for stream in container.streams]


def test_only_the_picture_and_sound_streams_are_served(tmp_path):
    for make in (mkv_chapters_and_attachment, mkv_subtitles, ts_data_stream):
        prepared = prepare(make(tmp_path), "video")
        assert prepared.served is not None, prepared.error
        with av.open(str(prepared.served)) as copy:
            assert [stream.type for stream in copy.streams] == ["video"]
            assert not copy.chapters()
            # What FFmpeg reads from the file type box, the same for every file: no tag.
            assert set(copy.metadata) <= {"major_brand", "minor_version", "compatible_brands"}
            assert not copy.streams[0].metadata.get("title")


# Same format for both sides of a pair ----------------------------------------------------


def served_shape(path: Path) -> tuple:
    """What a browser could tell a file by, short of its content: container, brand, box
    order, and each stream's codec, profile, pixel format, rate, layout and tags."""
    data = path.read_bytes()
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, offset)
        boxes.append(kind)
        offset += max(size, 8)
    with av.open(str(path)) as container:
        streams = []
        for stream in container.streams:
            context = stream.codec_context
            streams.append(
                (stream.type, context.name, context.profile, dict(stream.metadata))
                + (
                    (context.pix_fmt, stream.average_rate, context.width, context.height)
                    if stream.type == "video"
                    else (context.sample_rate, context.layout.name)
                )
            )
        return container.format.name, data[4:24], boxes, dict(container.metadata), streams


def test_webm_and_mp4_of_the_same_clip_are_served_alike(tmp_path):
    mp4 = prepare(video_write(tmp_path / "a.mp4"), "video")
    webm = prepare(video_write(tmp_path / "b.webm", fmt="webm", codec="libvpx-vp9"), "video")
    assert served_shape(mp4.served) == served_shape(webm.served)
    *_, boxes, _, streams = served_shape(mp4.served)
    assert boxes[:2] == [b"ftyp", b"moov"]  # +faststart: the index first
    assert [stream[:2] for stream in streams] == [("audio", "aac"), ("video", "h264")]
    assert (mp4.info.served_format, mp4.info.format, webm.info.format) == ("MP4", "MP4", "WEBM")


def test_wav_and_mp3_of_the_same_clip_are_served_alike(tmp_path):
    wav = prepare(audio_write(tmp_path / "a.wav", seconds=0.5), "audio")
    mp3 = prepare(audio_write(tmp_path / "a.mp3", fmt="mp3", seconds=0.5), "audio")
    assert served_shape(wav.served) == served_shape(mp3.served)
    [stream] = served_shape(wav.served)[4]
    # AAC at 48 kHz, stereo, 192 kb/s, whatever the source (here mono 16 kHz).
    assert stream[:2] == ("audio", "aac")
    assert stream[4:] == (48000, "stereo")
    assert wav.info.served_format == "M4A"


def test_mono_is_served_as_the_same_sound_in_both_channels(tmp_path):
    prepared = prepare(audio_write(tmp_path / "a.wav", seconds=0.5), "audio")
    with av.open(str(prepared.served)) as copy:
        samples = np.concatenate([frame.to_ndarray() for frame in copy.decode(audio=0)], axis=1)
    left, right = samples
    # The same channel twice, as far as AAC's joint stereo coding keeps it.
    np.testing.assert_allclose(left, right, atol=0.01)
    # A 0.5-amplitude tone stays at 0.5: no 3 dB lost to a downmix.
    assert np.abs(left).max() == pytest.approx(0.5, abs=0.05)


def _frame_times(path: Path) -> tuple[list[float], list[bool]]:
    with av.open(str(path)) as container:
        packets = [p for p in container.demux(video=0) if p.size]
        packets.sort(key=lambda p: p.pts)
        return [float(p.pts * p.time_base) for p in packets], [p.is_keyframe for p in packets]


def test_a_keyframe_every_second_at_a_constant_frame_rate(tmp_path):
    """A variable frame rate source (gaps of 10 to 250 ms) is served at a constant rate with
    a keyframe exactly every second and none between."""
    path = tmp_path / "vfr.mkv"
    times_ms = np.cumsum([0] + [10, 250, 100, 40, 100] * 8)
    with av.open(str(path), "w", format="matroska") as container:
        stream = _video_stream(container, "libx264", rate=10)
        stream.codec_context.time_base = Fraction(1, 1000)
        for index, ms in enumerate(times_ms):
            frame = av.VideoFrame.from_ndarray(
                np.random.default_rng(index).integers(0, 255, (48, 64, 3), np.uint8)
            )
            frame.pts, frame.time_base = int(ms), Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    prepared = prepare(path, "video")
    assert prepared.served is not None, prepared.error
    times, keyframes = _frame_times(prepared.served)
    steps = set(np.round(np.diff(times), 6))
    assert len(steps) == 1, steps
    rate = round(1 / steps.pop())
    keys = [round(time, 6) for time, key in zip(times, keyframes, strict=True) if key]
    assert keys == [float(second) for second in range(len(keys))]
    assert len(times) > 2 * rate


def test_rotation_is_applied_to_the_pixels_and_colour_tags_kept(tmp_path):
    path = tmp_path / "turned.mp4"
    with av.open(str(path), "w", format="mp4") as container:
        stream = _video_stream(container, "libx264")
        context = stream.codec_context
        context.color_primaries, context.color_trc, context.colorspace = 9, 16, 9  # BT.2020/PQ
        stream.set_display_rotation(90)
        pixels = np.zeros((48, 64, 3), np.uint8)
        pixels[:8, :8] = 255  # a white square top left
        for _ in range(3):
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    with av.open(str(path)) as original:
        assert next(original.decode(video=0)).rotation == 90
    prepared = prepare(path, "video")
    assert prepared.served is not None, prepared.error
    with av.open(str(prepared.served)) as copy:
        frame = next(copy.decode(video=0))
        assert (frame.width, frame.height, frame.rotation) == (48, 64, 0)
        luma = frame.to_ndarray(format="gray")
        # Turned 90 degrees counter-clockwise, as the display matrix says: top left goes
        # bottom left.
        assert luma[-8:, :8].mean() > 200
        assert luma[:8, :8].mean() < 60
        served = copy.streams.video[0].codec_context
        assert (served.color_primaries, served.color_trc, served.colorspace) == (9, 16, 9)


# Bombs -------------------------------------------------------------------------------------


def _duration_patched(data: bytes, seconds: float) -> bytes:
    """A Matroska file whose segment Duration (in milliseconds) claims ``seconds``."""
    at = data.find(b"\x44\x89\x88")
    assert at > 0, "no 8-byte Duration element"
    return data[: at + 3] + struct.pack(">d", seconds * 1000) + data[at + 11 :]


def test_a_header_that_lies_about_the_duration_is_stopped_at_the_limit(tmp_path):
    path = tmp_path / "long.mkv"
    with av.open(str(path), "w", format="matroska") as container:
        _frames(container, _video_stream(container), count=40)  # 4 s
    path.write_bytes(_duration_patched(path.read_bytes(), 0.5))
    with av.open(str(path)) as liar:
        assert liar.duration / av.time_base < 1
    prepared = prepare(path, "video", seconds=2)
    assert prepared.served is None
    assert "longer than the limit of 2 s" in prepared.error
    assert not list(tmp_path.glob("served-*"))


def test_more_frames_than_the_limits_allow_are_stopped(tmp_path):
    path = tmp_path / "many.mkv"
    with av.open(str(path), "w", format="matroska") as container:
        _frames(container, _video_stream(container), count=30)
    prepared = prepare(path, "video", seconds=4, frame_rate=5)
    assert "claims 10 frames a second, more than the limit of 5" in prepared.error
    path.write_bytes(_duration_patched(path.read_bytes(), 0.1))
    prepared = prepare(path, "video", seconds=1, frame_rate=10)
    assert prepared.served is None
    assert "more frames than 1 s at 10 a second" in prepared.error or (
        "longer than the limit of 1 s" in prepared.error
    )


def test_a_sample_rate_over_the_limit_is_refused_from_the_header(tmp_path):
    path = audio_write(tmp_path / "fast.wav")
    data = bytearray(path.read_bytes())
    fmt = data.find(b"fmt ")
    struct.pack_into("<II", data, fmt + 12, 10_000_000, 20_000_000)  # rate, bytes a second
    path.write_bytes(bytes(data))
    prepared = prepare(path, "audio")
    assert "a sample rate of 10,000,000 Hz, more than the limit of 192,000 Hz" in prepared.error


def test_frames_over_the_pixel_limit_are_refused_from_the_header(tmp_path):
    prepared = prepare(video_write(tmp_path / "a.mp4"), "video", pixels=64 * 48 - 1)
    assert "the header claims 64x48 pixels a frame, more than the limit of 3,071" in (
        prepared.error
    )


def test_a_declared_duration_over_the_limit_is_refused_before_decoding(tmp_path):
    path = tmp_path / "long.mkv"
    with av.open(str(path), "w", format="matroska") as container:
        _frames(container, _video_stream(container), count=3)
    path.write_bytes(_duration_patched(path.read_bytes(), 100_000))
    prepared = prepare(path, "video")
    assert "the header claims a duration of 100,000 s, longer than the limit of 600 s" in (
        prepared.error
    )


# Fuzz ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, tuple[str, bytes]]:
    folder = tmp_path_factory.mktemp("seeds")
    return {
        "mp4": ("video", video_write(folder / "a.mp4", frames=3).read_bytes()),
        "webm": ("video", video_write(folder / "a.webm", fmt="webm", codec="libvpx-vp9",
                                      frames=3).read_bytes()),
        "wav": ("audio", audio_write(folder / "a.wav", seconds=0.1).read_bytes()),
        "mp3": ("audio", audio_write(folder / "a.mp3", fmt="mp3", seconds=0.1).read_bytes()),
        "ogg": ("audio", audio_write(folder / "a.ogg", fmt="ogg", seconds=0.1).read_bytes()),
        "flac": ("audio", audio_write(folder / "a.flac", fmt="flac", seconds=0.1).read_bytes()),
    }  # fmt: skip


@hypothesis_settings(
    max_examples=100,
    deadline=5000,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.sampled_from(["mp4", "webm", "wav", "mp3", "ogg", "flac"]),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), max_size=12),
    cut=st.one_of(st.none(), st.floats(0, 1)),
)
def test_mutated_files_are_rebuilt_or_refused_never_crash(seeds, tmp_path, seed, edits, cut):
    kind, original = seeds[seed]
    data = bytearray(original)
    for where, value in edits:
        data[int(where * len(data))] = value
    if cut is not None:
        data = data[: int(cut * len(data))]
    path = tmp_path / f"fuzz.{seed}"
    path.write_bytes(bytes(data))
    raised: AvMediaError | None = None
    try:
        prepared = prepare(path, kind, seconds=5)
    except AvMediaError as exc:
        raised = exc
    if raised is not None:
        # A header asking FFmpeg for more memory than there is: raised for the bounded child
        # that runs av_prepare to refuse naming its memory limit.
        assert isinstance(raised.__context__, MemoryError), raised
        return
    assert isinstance(prepared, AvPrepared)
    if prepared.served is None:
        assert prepared.error
    else:
        assert prepared.info is not None
        assert not prepared.error
        assert prepared.served.stat().st_size > 0
        assert_no_planted(prepared.served.read_bytes())
        prepared.served.unlink()


@pytest.mark.django_db
def test_a_clip_remuxed_by_an_earlier_version_is_not_served_until_it_is_re_encoded(
    client_for, alice, project, tmp_path, settings
):
    from django.core.management import call_command

    from annotation.core.media_keys import media_path
    from annotation.models import Media
    from tests.judges.av_judge_support import import_pairs, media_pair

    name = mp3_stray_bytes_then_id3v1(tmp_path).name
    audio_write(tmp_path / "b.wav")
    pair = media_pair("a1", "t2a", [["audio", name]], [["audio", "b.wav"]])
    import_pairs(project, tmp_path, [pair])
    clip = Media.objects.get(format="MP3")
    url = media_path(slug=project.slug, sha256=clip.sha256)
    # What an earlier version left: the remux, served as the original's format.
    Media.objects.filter(pk=clip.pk).update(
        served_sha256=clip.sha256, strip_result=Media.StripResult.UNCHANGED, served_format=None
    )
    client = client_for(alice)
    assert client.get(url).status_code == 404  # never the old copy, which kept the tag

    out = io.StringIO()
    call_command("strip_media_metadata", stdout=out)
    assert "Served copies rebuilt: 1" in out.getvalue()
    clip.refresh_from_db()
    assert (clip.strip_result, clip.served_format) == (Media.StripResult.REBUILT, "M4A")
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "audio/mp4"
    assert_no_planted(b"".join(response.streaming_content))
