"""Video, audio and 3D parts in an import: probed and decoded with PyAV, refused with a line
error naming the file and the reason, and served as a copy re-encoded from the decoded frames
and samples, without metadata, in one format for every source (docs/import-format.md, "Video,
audio and 3D"; the adversarial corpus is tests/annotation/media/test_av_rebuild.py)."""

from __future__ import annotations

import itertools
import json
import struct
import zipfile
from pathlib import Path

import av
import numpy as np
import pytest

from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.media.glb import GlbError, glb_inspect
from annotation.media.glb_rebuild import glb_rebuild
from annotation.models import Media, Pair, ProjectMedia
from tests.annotation.imports.conftest import (
    assert_nothing_imported,
    stored_files,
    text_pair,
    write_jsonl,
)
from tests.annotation.media.conftest import (
    PLANTED,
    assert_no_planted,
    audio_write,
    glb_bytes,
    glb_pack,
    video_write,
)

pytestmark = pytest.mark.django_db


def media_pair(pair_id: str, kind: str, path_a: str, path_b: str, **extra) -> dict:
    pair = text_pair(pair_id, task=f"t2{kind}", **extra)
    pair["response_a"]["response_content"] = [[kind, path_a]]
    pair["response_b"]["response_content"] = [[kind, path_b]]
    return pair


def import_media(project, tmp_path: Path, pairs: list[dict]):
    return pairs_import(
        project=project, source=write_jsonl(tmp_path / "pairs.jsonl", pairs), media_root=tmp_path
    )


def served_path(media: Media, settings) -> Path:
    return Path(settings.MEDIA_ROOT) / media.served_relative_path


def original_path(media: Media, settings) -> Path:
    return Path(settings.MEDIA_ROOT) / media.relative_path


def decoded_frames(path: Path) -> dict[str, list[np.ndarray]]:
    """The luma of every video frame and the samples of every audio frame, by stream type."""
    out: dict[str, list[np.ndarray]] = {"video": [], "audio": []}
    with av.open(str(path)) as container:
        for frame in container.decode(*container.streams.video[:1], *container.streams.audio[:1]):
            if isinstance(frame, av.VideoFrame):
                out["video"].append(frame.to_ndarray(format="gray"))
            else:
                out["audio"].append(frame.to_ndarray())
    return out


# Import and probe ------------------------------------------------------------------------


def test_video_parts_are_probed_stored_and_given_a_poster(project, tmp_path, settings):
    video_write(tmp_path / "a.mp4")
    video_write(tmp_path / "b.webm", fmt="webm", codec="libvpx-vp9", frames=3)
    prompt = [["video", "a.mp4"], ["text", "Which clip follows the prompt?"]]
    summary = import_media(
        project, tmp_path, [media_pair("v1", "video", "a.mp4", "b.webm", prompt_content=prompt)]
    )
    assert summary.created_pairs == 1
    pair = Pair.objects.get(project=project)
    mp4 = Media.objects.get(sha256=pair.prompt.content[0]["media"])
    assert pair.prompt.content[0] == {"type": "video", "media": mp4.sha256}
    assert pair.response_a.content == [{"type": "video", "media": mp4.sha256}]
    assert (mp4.kind, mp4.format, mp4.width, mp4.height) == ("video", "MP4", 64, 48)
    assert (mp4.video_codec, mp4.audio_codec, mp4.frame_rate) == ("h264", "aac", 10.0)
    assert mp4.container.startswith("mov,mp4")
    assert mp4.duration_seconds == pytest.approx(0.4, abs=0.05)
    assert (mp4.sample_rate, mp4.channels) == (48000, 2)
    webm = Media.objects.get(sha256=pair.response_b.content[0]["media"])
    assert (webm.format, webm.video_codec, webm.audio_codec) == ("WEBM", "vp9", "opus")
    assert webm.content_type == "video/webm"
    # Both served alike: H.264 and AAC in MP4.
    assert (mp4.served_format, webm.served_format) == ("MP4", "MP4")
    assert webm.served_content_type == "video/mp4"
    # The poster is an image Media of the first frame, linked to the project for serving.
    poster = Media.objects.get(sha256=mp4.poster_sha256)
    assert (poster.kind, poster.format, poster.width, poster.height) == ("image", "JPEG", 64, 48)
    assert ProjectMedia.objects.filter(project=project, media=poster).exists()
    assert original_path(poster, settings).is_file()
    # Rebuilt as every image is, in the child that checked the video.
    assert (poster.served_format, poster.strip_result) == ("PNG", "rebuilt")
    assert served_path(poster, settings).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The original is kept byte for byte for releases; the served copy beside it.
    assert original_path(mp4, settings).read_bytes() == (tmp_path / "a.mp4").read_bytes()
    assert mp4.strip_result == "rebuilt"
    assert served_path(mp4, settings).name.endswith(".mp4")
    assert served_path(mp4, settings).is_file()


@pytest.mark.parametrize(
    ("fmt", "layout"),
    [("s16", "stereo"), ("s16p", "stereo"), ("fltp", "stereo"), ("flt", "mono"), ("u8", "5.1"),
     ("u8p", "stereo"), ("s32", "stereo"), ("s32p", "mono"), ("dbl", "stereo"), ("dblp", "5.1")],
)  # fmt: skip
def test_a_frames_samples_are_those_of_to_ndarray_as_floats(fmt, layout):
    from annotation.media.av_samples import _as_float, frame_samples

    rng = np.random.default_rng(3)
    channels = av.AudioLayout(layout).nb_channels
    shape = (channels, 999) if fmt.endswith("p") else (1, 999 * channels)
    kind = {"s16": np.int16, "u8": np.uint8, "s32": np.int32}.get(fmt.removesuffix("p"))
    if kind is None:
        data = rng.uniform(-1, 1, shape).astype(np.float32 if "flt" in fmt else np.float64)
    else:
        data = rng.integers(np.iinfo(kind).min, np.iinfo(kind).max, shape, dtype=kind)
    frame = av.AudioFrame.from_ndarray(data, format=fmt, layout=layout)
    ours, theirs = frame_samples(frame), _as_float(frame.to_ndarray())
    assert ours.dtype == theirs.dtype == np.float32
    assert np.array_equal(ours, theirs)


def test_waveform_peaks_gathered_in_batches_are_those_of_each_10_ms_block():
    """Frames reduced many at a time give the peaks that the whole track taken at once
    gives: every 10 ms block's loudest sample, across channels, however frames cut it."""
    from annotation.media.av_samples import AudioPeaks

    rng = np.random.default_rng(7)
    rate = 44100
    track = (rng.random((2, rate * 3)) * 2 - 1).astype(np.float32)
    track *= np.linspace(0.01, 1, track.shape[1], dtype=np.float32)  # a rising envelope
    peaks = AudioPeaks(rate)
    start = 0
    for size in itertools.cycle([1152, 1024, 333, 4096]):
        if start >= track.shape[1]:
            break
        peaks.add(track[:, start : start + size])
        start += size
    block = rate // 100
    blocks = [float(np.abs(track[:, s : s + block]).max()) for s in range(0, track.shape[1], block)]
    edges = np.linspace(0, len(blocks), 201).astype(int)
    expected = [round(max(blocks[a:b]), 3) for a, b in itertools.pairwise(edges) if b > a]
    assert peaks.reduced() == expected
    assert expected[0] < 0.05
    assert expected[-1] > 0.9


@pytest.mark.parametrize("fmt", ["wav", "mp3", "flac", "ogg"])
def test_audio_parts_are_probed_with_waveform_peaks(project, tmp_path, fmt):
    audio_write(tmp_path / f"a.{fmt}", fmt=fmt)
    audio_write(tmp_path / f"b.{fmt}", fmt=fmt, seconds=0.3)
    import_media(project, tmp_path, [media_pair("a1", "audio", f"a.{fmt}", f"b.{fmt}")])
    pair = Pair.objects.get(project=project)
    clip = Media.objects.get(sha256=pair.response_a.content[0]["media"])
    assert pair.response_a.content[0]["type"] == "audio"
    assert (clip.kind, clip.format, clip.width, clip.height) == ("audio", fmt.upper(), 0, 0)
    assert clip.channels == 1
    assert clip.sample_rate in (16000, 48000)
    assert clip.duration_seconds == pytest.approx(0.2, abs=0.05)
    assert clip.poster_sha256 is None
    # A 0.5-amplitude tone: every peak near 0.5 (the codec's edges aside), none above 1.
    assert 10 <= len(clip.peaks) <= 200
    assert all(0 <= peak <= 1 for peak in clip.peaks)
    assert np.median(clip.peaks) == pytest.approx(0.5, abs=0.08)


def test_a_glb_model_is_checked_and_stored(project, tmp_path, settings):
    (tmp_path / "a.glb").write_bytes(glb_bytes())
    (tmp_path / "b.glb").write_bytes(glb_bytes(generator="other"))
    import_media(project, tmp_path, [media_pair("m1", "model3d", "a.glb", "b.glb")])
    pair = Pair.objects.get(project=project)
    model = Media.objects.get(sha256=pair.response_a.content[0]["media"])
    assert pair.response_a.content[0]["type"] == "model3d"
    assert (model.kind, model.format, model.content_type) == (
        "model3d",
        "GLB",
        "model/gltf-binary",
    )
    assert original_path(model, settings).read_bytes() == (tmp_path / "a.glb").read_bytes()


# Blinding --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda path: video_write(path / "c.mp4"),
        lambda path: video_write(path / "c.webm", fmt="webm", codec="libvpx-vp9"),
        lambda path: audio_write(path / "c.wav", fmt="wav"),
        lambda path: audio_write(path / "c.mp3", fmt="mp3"),
        lambda path: audio_write(path / "c.flac", fmt="flac"),
        lambda path: audio_write(path / "c.ogg", fmt="ogg"),
    ],
    ids=["mp4", "webm", "wav", "mp3", "flac", "ogg"],
)
def test_the_served_copy_is_rebuilt_without_metadata_and_shows_the_same(
    project, tmp_path, settings, make
):
    source = make(tmp_path)
    assert PLANTED.encode() in source.read_bytes()  # planted in every tag written
    kind = "video" if source.suffix in (".mp4", ".webm") else "audio"
    import_media(project, tmp_path, [media_pair("s1", kind, source.name, source.name)])
    media = Media.objects.get(kind=kind)
    assert (media.strip_result, media.served_format) == (
        "rebuilt",
        "MP4" if kind == "video" else "M4A",
    )
    served = served_path(media, settings)
    assert_no_planted(served.read_bytes())
    original = decoded_frames(original_path(media, settings))
    copy = decoded_frames(served)
    assert original[kind], "nothing decoded"
    if kind == "video":
        # The same frames, re-encoded at CRF 16: within a few levels of the original's.
        assert len(copy["video"]) == len(original["video"])
        for ours, theirs in zip(copy["video"], original["video"], strict=True):
            assert np.abs(ours.astype(int) - theirs.astype(int)).mean() < 2
    # The same sound, as long (AAC adds its priming, which the player skips).
    with av.open(str(served)) as container:
        assert container.duration / av.time_base == pytest.approx(media.duration_seconds, abs=0.05)


def test_glb_generator_extras_and_names_are_not_served(tmp_path):
    original = glb_bytes()
    info = glb_inspect(original)
    served = glb_rebuild(info)
    assert PLANTED.encode() in original
    assert PLANTED.encode() not in served
    again = glb_inspect(served)  # still a valid model
    assert again.bin_chunk == info.bin_chunk
    assert again.document["accessors"] == info.document["accessors"]
    assert "generator" not in again.document["asset"]
    assert again.document["asset"]["version"] == "2.0"


# Refusals --------------------------------------------------------------------------------


def _stts_stretched(data: bytes) -> bytes:
    """An MP4 whose frames each claim 0x0FFFFFFF ticks (about 7 hours at 10,240 a second),
    its edit list removed so that the claim stands."""
    out = bytearray(data)
    stts = out.find(b"stts")
    for entry in range(struct.unpack_from(">I", out, stts + 8)[0]):
        struct.pack_into(">I", out, stts + 16 + 8 * entry, 0x0FFFFFFF)
    edts = out.find(b"edts")
    out[edts : edts + 4] = b"free"
    return bytes(out)


def _bad_files(tmp_path: Path) -> dict[str, tuple[str, bytes, str]]:
    good = video_write(tmp_path / "good.mp4").read_bytes()
    tone = audio_write(tmp_path / "good.wav").read_bytes()
    silent = video_write(tmp_path / "n.mp4", audio=False)
    y4m = "YUV4MPEG2 W{0} H{0} F25:1 Ip A1:1 C420jpeg\nFRAME\n"
    return {
        "empty": ("video", b"", "the file is empty"),
        "html": ("video", b"<!DOCTYPE html><html><body>404</body></html>", "HTML"),
        "truncated": ("video", good[: len(good) // 2], "truncated"),
        "corrupt": ("video", good[:2000] + bytes(5000) + good[7000:], "corrupt"),
        "huge-header": ("video", y4m.format(100_000).encode() + bytes(64), "cannot be read"),
        "raw-stream": ("video", y4m.format(64).encode() + bytes(64), "is not read"),
        "absurd-duration": ("video", _stts_stretched(silent.read_bytes()),
                            "longer than the limit of 600 s"),
        "audio-truncated": ("audio", tone[:50], "truncated"),
        "no-video-stream": ("video", tone, "no video stream"),
        "glb-truncated": ("model3d", glb_bytes()[:-8], "truncated"),
        "glb-not-glb": ("model3d", b"<html></html>", "not a binary glTF"),
        "glb-view-outside": ("model3d", glb_bytes(json_extra={"bufferViews": [
            {"buffer": 0, "byteOffset": 30, "byteLength": 36}]}), "lies outside the BIN chunk"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        "empty",
        "html",
        "truncated",
        "corrupt",
        "huge-header",
        "raw-stream",
        "absurd-duration",
        "audio-truncated",
        "no-video-stream",
        "glb-truncated",
        "glb-not-glb",
        "glb-view-outside",
    ],
)
def test_bad_files_are_refused_as_line_errors_leaving_nothing(project, tmp_path, case):
    kind, data, reason = _bad_files(tmp_path)[case]
    suffix = {"video": "mp4", "audio": "wav", "model3d": "glb"}[kind]
    (tmp_path / f"bad.{suffix}").write_bytes(data)
    good = {"video": "good.mp4", "audio": "good.wav", "model3d": "good.glb"}[kind]
    (tmp_path / "good.glb").write_bytes(glb_bytes())
    pairs = [
        media_pair("ok", kind, good, good),
        media_pair("bad", kind, good, f"bad.{suffix}"),
    ]
    with pytest.raises(ImportFailed) as refused:
        import_media(project, tmp_path, pairs)
    [issue] = refused.value.issues
    assert issue.line == 2
    assert issue.field == "response_b.response_content[0]"
    assert f"bad.{suffix}" in issue.message
    assert reason in issue.message
    assert_nothing_imported(project)


def test_a_container_not_on_the_list_is_refused_with_the_reason(project, tmp_path):
    # Raw YUV4MPEG: FFmpeg reads it, but it is no container Arbiter reads (an AVI is, and is
    # re-encoded like every other file: test_an_avi_is_served_as_mp4).
    y4m = b"YUV4MPEG2 W64 H48 F10:1 Ip A1:1 C420jpeg\n" + (b"FRAME\n" + bytes(64 * 48 * 3 // 2)) * 2
    (tmp_path / "c.y4m").write_bytes(y4m)
    with pytest.raises(ImportFailed, match=r"this container \(yuv4mpegpipe\) is not read"):
        import_media(project, tmp_path, [media_pair("x", "video", "c.y4m", "c.y4m")])
    assert_nothing_imported(project)


def test_limits_come_from_settings(project, tmp_path, settings):
    video_write(tmp_path / "a.mp4")
    settings.ARBITER_MAX_MEDIA_SECONDS = 0
    with pytest.raises(ImportFailed, match="longer than the limit of 0 s"):
        import_media(project, tmp_path, [media_pair("x", "video", "a.mp4", "a.mp4")])
    settings.ARBITER_MAX_MEDIA_SECONDS = 600
    settings.ARBITER_MAX_VIDEO_BYTES = 100
    with pytest.raises(ImportFailed, match="larger than 100 bytes"):
        import_media(project, tmp_path, [media_pair("x", "video", "a.mp4", "a.mp4")])
    assert_nothing_imported(project)


def test_media_urls_are_refused_for_video(project, tmp_path):
    project.allow_media_urls = True
    project.save()
    with pytest.raises(ImportFailed, match="not fetched by URL"):
        import_media(
            project, tmp_path, [media_pair("x", "video", "https://example.org/a.mp4", "a.mp4")]
        )


def test_glb_with_an_external_buffer_is_refused():
    document = {"asset": {"version": "2.0"}, "buffers": [{"uri": "mesh.bin", "byteLength": 4}]}
    with pytest.raises(GlbError, match="points to another file"):
        glb_inspect(glb_pack(json.dumps(document).encode(), b""))


# The REST API's content ----------------------------------------------------------------


def test_the_api_shows_media_parts_with_their_player_facts(project, alice, api_for, tmp_path):
    video_write(tmp_path / "a.mp4")
    audio_write(tmp_path / "a.wav")
    pair = media_pair("v1", "video", "a.mp4", "a.mp4", prompt_content=[["audio", "a.wav"]])
    pair["response_b"]["response_content"] = [["text", "no video"]]
    import_media(project, tmp_path, [pair])
    Pair.objects.filter(project=project).update(status="queued")
    api = api_for(alice)
    data = api.post(f"/api/v1/projects/{project.slug}/claim/").json()
    [clip] = data["prompt"]
    assert clip["type"] == "audio"
    assert clip["duration_seconds"] == pytest.approx(0.2, abs=0.05)
    # The original's sample rate and channels are no player's business (issue 31, item 8).
    assert "sample_rate" not in clip
    assert "channels" not in clip
    assert len(clip["peaks"]) >= 10
    [video] = [part for part in data["left"] + data["right"] if part["type"] == "video"]
    assert (video["width"], video["height"], video["frame_rate"]) == (64, 48, 10.0)
    assert video["poster_url"].startswith("http://testserver/")
    served = api.get(video["url"])
    assert served.status_code == 200
    assert served["Content-Type"] == "video/mp4"
    body = b"".join(served.streaming_content)
    assert body
    assert PLANTED.encode() not in body
    poster = api.get(video["poster_url"])
    assert poster.status_code == 200
    assert poster["Content-Type"] == "image/png"  # rebuilt, as every image is
    # Nothing in the payload names the file or the model.
    text = json.dumps(data)
    assert "a.mp4" not in text
    assert "m-one" not in text
    assert PLANTED not in text


def test_a_video_in_an_archive_may_be_larger_than_an_image(project, tmp_path, settings):
    video = video_write(tmp_path / "a.mp4").read_bytes()
    settings.ARBITER_MAX_IMAGE_BYTES = len(video) - 1
    archive = tmp_path / "media.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("clips/a.mp4", video)
    pairs = [media_pair("x", "video", "clips/a.mp4", "clips/a.mp4")]
    summary = pairs_import(
        project=project, source=write_jsonl(tmp_path / "p.jsonl", pairs), archive=archive
    )
    assert summary.created_pairs == 1
    assert Media.objects.filter(kind="video").count() == 1


@pytest.mark.parametrize(
    "accessor",
    [
        {"bufferView": 0, "componentType": [5126], "count": 3, "type": "VEC3"},
        {"bufferView": 0, "componentType": 5126, "count": 4, "type": "VEC3"},
        {"bufferView": 7, "componentType": 5126, "count": 1, "type": "VEC3"},
        {"bufferView": 0, "componentType": 5126, "count": 1, "type": {"x": 1}},
    ],
    ids=["unhashable-type", "reads-past-view", "no-such-view", "wrong-type"],
)
def test_glb_accessors_are_bounds_checked(accessor):
    with pytest.raises(GlbError, match=r"accessors\[0\]"):
        glb_inspect(glb_bytes(json_extra={"accessors": [accessor]}))


def test_importing_the_same_media_again_reuses_them(project, other_project, tmp_path):
    video_write(tmp_path / "a.mp4")
    audio_write(tmp_path / "a.wav")
    pairs = [media_pair("v1", "video", "a.mp4", "a.mp4", prompt_content=[["audio", "a.wav"]])]
    first = import_media(project, tmp_path, pairs)
    files = stored_files()
    again = import_media(project, tmp_path, pairs)
    other = import_media(other_project, tmp_path, pairs)
    # The video, its poster and the clip.
    assert (first.media_created, again.existing_pairs, other.media_reused) == (3, 1, 3)
    assert Media.objects.count() == 3
    assert stored_files() == files


def test_bounded_children_check_the_files_the_same_one_or_several_at_once(
    project, other_project, tmp_path, settings, monkeypatch
):
    """A window of pairs' video and audio files is checked in bounded children, several at
    once or one at a time: the same rows, and the same line error for a bad file."""
    from annotation.media.media_pool import MediaPool

    pooled = []
    submit = MediaPool.submit

    def counting(self, files, **kwargs):
        pooled.append(len(files))
        return submit(self, files, **kwargs)

    monkeypatch.setattr(MediaPool, "submit", counting)
    video_write(tmp_path / "a.mp4")
    video_write(tmp_path / "b.mp4", frames=6)
    audio_write(tmp_path / "a.wav")
    audio_write(tmp_path / "b.mp3", fmt="mp3")
    pairs = [
        media_pair("v", "video", "a.mp4", "b.mp4"),
        media_pair("a", "audio", "a.wav", "b.mp3"),
    ]
    columns = (
        "sha256", "format", "duration_seconds", "served_sha256", "served_format",
        "served_frame_rate", "strip_result", "peaks", "poster_sha256",
    )  # fmt: skip
    settings.ARBITER_MEDIA_WORKERS = 2
    import_media(project, tmp_path, pairs)
    assert pooled == [4]
    in_workers = sorted(Media.objects.filter(kind__in=["video", "audio"]).values_list(*columns))
    Pair.objects.all().delete()
    ProjectMedia.objects.all().delete()
    Media.objects.all().delete()
    settings.ARBITER_MEDIA_WORKERS = 1
    import_media(other_project, tmp_path, pairs)
    assert pooled == [4, 4]
    assert sorted(Media.objects.filter(kind__in=["video", "audio"]).values_list(*columns)) == (
        in_workers
    )

    settings.ARBITER_MEDIA_WORKERS = 2
    (tmp_path / "bad.mp4").write_bytes(b"<!DOCTYPE html><html></html>")
    with pytest.raises(ImportFailed) as refused:
        import_media(project, tmp_path, [*pairs, media_pair("bad", "video", "a.mp4", "bad.mp4")])
    [issue] = refused.value.issues
    assert (issue.line, issue.field) == (3, "response_b.response_content[0]")
    assert "bad.mp4" in issue.message
    assert "HTML" in issue.message
    assert pooled[-1] == 5


def test_the_next_windows_files_are_handed_over_before_the_last_windows_are_awaited(
    project, tmp_path, settings, monkeypatch
):
    """The children never wait for the importer between windows: window n + 1's files go
    to the media server before the import waits for window n's; a file named in two windows
    in flight at once is checked once; the rows are those of one window at a time."""
    from annotation.imports import importer
    from annotation.media.bounded import BoundedBatch
    from annotation.media.media_pool import MediaPool

    events: list[tuple[str, tuple[str, ...]]] = []
    submit, outcomes = MediaPool.submit, BoundedBatch.outcomes

    def recording_submit(self, files, **kwargs):
        batch = submit(self, files, **kwargs)
        batch.names = tuple(path.name for path, _ in files)
        events.append(("submit", batch.names))
        return batch

    def recording_outcomes(self):
        if getattr(self, "names", None) and ("await", self.names) not in events:
            events.append(("await", self.names))
        return outcomes(self)

    monkeypatch.setattr(MediaPool, "submit", recording_submit)
    monkeypatch.setattr(BoundedBatch, "outcomes", recording_outcomes)
    for n in range(4):
        audio_write(tmp_path / f"{n}.wav", seconds=1 + n)
    pairs = [
        media_pair("p0", "audio", "0.wav", "1.wav"),
        media_pair("p1", "audio", "1.wav", "2.wav"),  # 1.wav: in window 0, still in flight
        media_pair("p2", "audio", "3.wav", "0.wav"),
    ]
    settings.ARBITER_MEDIA_WORKERS = 2
    monkeypatch.setattr(importer, "MEDIA_WINDOW_PAIRS", 1)
    summary = import_media(project, tmp_path, pairs)
    assert events == [
        ("submit", ("0.wav", "1.wav")),
        ("submit", ("2.wav",)),
        ("await", ("0.wav", "1.wav")),
        ("submit", ("3.wav",)),
        ("await", ("2.wav",)),
        ("await", ("3.wav",)),
    ]
    assert summary.created_pairs == 3
    seconds = Media.objects.filter(kind="audio").values_list("duration_seconds", flat=True)
    assert sorted(seconds) == [1.0, 2.0, 3.0, 4.0]  # each file, once


def test_the_child_stages_every_file_of_a_video_so_the_importer_only_renames(tmp_path):
    """``av_import`` writes the original, the served copy, the poster and its served copy in
    the staging folder, each under a name of its own, with the hashes the rows record."""
    import hashlib

    from annotation.media.av_probe import av_limits
    from annotation.media.media_pool import av_import

    video_write(tmp_path / "a.mp4")
    staging = tmp_path / "staging"
    staging.mkdir()
    done = av_import(tmp_path / "a.mp4", kind="video", staging=staging, limits=av_limits())
    prepared, poster = done.prepared, done.poster
    assert prepared.error == ""
    assert poster is not None
    assert done.poster_files is not None
    assert prepared.info.poster_jpeg is None  # its bytes are staged, not sent back
    files = [prepared.original, prepared.served, *done.poster_files]
    assert sorted(staging.iterdir()) == sorted(files)
    digests = [hashlib.sha256(path.read_bytes()).hexdigest() for path in files]
    assert digests == [
        prepared.info.sha256,
        prepared.served_sha256,
        poster.sha256,
        poster.served_sha256,
    ]
    assert prepared.original.read_bytes() == (tmp_path / "a.mp4").read_bytes()

    (tmp_path / "bad.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(100))
    refused = av_import(tmp_path / "bad.mp4", kind="video", staging=staging, limits=av_limits())
    assert refused.prepared.error
    assert refused.poster is None
    assert sorted(staging.iterdir()) == sorted(files)  # a refusal leaves nothing behind


def test_an_avi_is_served_as_mp4(project, tmp_path, settings):
    """A file a browser cannot play (MPEG-4 Part 2 in AVI) is re-encoded at import like every
    other: its pairs are given to annotators at once."""
    video_write(tmp_path / "a.avi", fmt="avi", codec="mpeg4", audio=False)
    import_media(project, tmp_path, [media_pair("avi", "video", "a.avi", "a.avi")])
    media = Media.objects.get(kind="video")
    assert (media.format, media.video_codec, media.container) == ("MP4", "mpeg4", "avi")
    assert (media.served_format, media.strip_result) == ("MP4", "rebuilt")
    with av.open(str(served_path(media, settings))) as copy:
        assert [s.codec_context.name for s in copy.streams] == ["h264"]
    assert original_path(media, settings).read_bytes() == (tmp_path / "a.avi").read_bytes()
