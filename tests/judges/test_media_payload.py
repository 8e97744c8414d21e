"""What an openai judge is sent for video and audio parts (docs/judges.md, "Video and audio"):
frames sampled uniformly with their timestamps, audio as input_audio parts for a judge that
takes audio, and a named permanent error for one that does not."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from annotation.media.judge_parts import sample_times, video_frames
from annotation.models import Media
from judges.backends import get_backend
from judges.backends.base import judge_judgeable
from judges.models import Judge
from judges.runs.services import judge_item
from tests.annotation.media.conftest import PLANTED, audio_write, video_write
from tests.judges.av_judge_support import (
    decoded_audio,
    frame_index,
    grey_video,
    import_pairs,
    input_audio_parts,
    media_pair,
)
from tests.judges.fake_openai import FakeOpenAI, Reply, verdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def server():
    with FakeOpenAI(verdict("1")) as fake:
        yield fake


def _judge(server, **fields) -> Judge:
    defaults = {
        "name": "av-judge",
        "kind": "openai",
        "base_url": server.base_url,
        "model": "omni-model",
        "timeout_s": 5.0,
        "options": {"max_retries": 0},
    }
    return Judge.objects.create(**{**defaults, **fields})


def _judge_pairs(judge: Judge, pairs, *, order="AB"):
    backend = get_backend(judge)
    try:
        items = [judge_item(pair, order, allow_tie=False) for pair in pairs]
        return judge_judgeable(backend, items)
    finally:
        backend.close()


def test_sample_times_spread_from_the_first_frame_to_the_last():
    assert sample_times(duration_s=4.0, frame_rate=10, count=8) == [
        0.0, 0.5, 1.1, 1.6, 2.2, 2.7, 3.3, 3.9,
    ]  # fmt: skip
    assert sample_times(duration_s=0.3, frame_rate=10, count=8) == [0.0, 0.1, 0.2]
    assert sample_times(duration_s=4.0, frame_rate=10, count=1) == [0.0]


def test_a_video_goes_as_frames_sampled_uniformly_each_labelled_with_its_time(
    project, server, tmp_path
):
    grey_video(tmp_path / "long.mp4", frames=40, rate=10)
    video_write(tmp_path / "short.mp4")
    (pair,) = import_pairs(
        project,
        tmp_path,
        [media_pair("v1", "t2v", [["video", "long.mp4"]], [["video", "short.mp4"]])],
    )
    judge = _judge(server, video_frames=8, video_frame_side=48)
    (result,) = _judge_pairs(judge, [pair])

    assert result.outcome == "ok", result.error
    (request,) = server.requests
    parts = request.content_parts
    labels = [p["text"] for p in parts if p["type"] == "text" and p["text"].startswith("frame ")]
    assert labels[:8] == [
        "frame 1 of 8 at 0.00 s", "frame 2 of 8 at 0.50 s", "frame 3 of 8 at 1.10 s",
        "frame 4 of 8 at 1.60 s", "frame 5 of 8 at 2.20 s", "frame 6 of 8 at 2.70 s",
        "frame 7 of 8 at 3.30 s", "frame 8 of 8 at 3.90 s",
    ]  # fmt: skip
    # the 4-frame second video gives its 4 distinct frames, not 8 with repeats
    assert labels[8:] == [f"frame {n} of 4 at {(n - 1) / 10:.2f} s" for n in range(1, 5)]
    # each label is followed by its frame, and the frame is the one at that time
    first_video = [parts[i + 1] for i, p in enumerate(parts) if p.get("text") in labels[:8]]
    assert [frame_index(p["image_url"]["url"]) for p in first_video] == [
        0, 5, 11, 16, 22, 27, 33, 39,
    ]  # fmt: skip
    assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in first_video)
    assert "Video of 4.00 s, 8 frames sampled uniformly:" in request.text
    # the videos sit inside their response sections, in the order shown
    text = request.text
    assert text.index("[Response 1]") < text.index("frame 8 of 8") < text.index("[Response 2]")
    assert text.index("[Response 2]") < text.index("frame 1 of 4")


def test_frames_are_scaled_to_the_judges_side_and_seek_where_the_gap_is_long(project, tmp_path):
    grey_video(tmp_path / "long.mp4", frames=40, rate=5)
    import_pairs(
        project, tmp_path, [media_pair("v1", "t2v", [["video", "long.mp4"]], [["text", "x"]])]
    )
    media = Media.objects.get(kind="video")
    frames = video_frames(media, count=3, max_side=32)
    assert [(f.label, frame_index(f.data_url)) for f in frames] == [
        ("frame 1 of 3 at 0.00 s", 0),
        ("frame 2 of 3 at 3.80 s", 19),
        ("frame 3 of 3 at 7.80 s", 39),
    ]
    sizes = {
        Image.open(io.BytesIO(base64.b64decode(f.data_url.split(",", 1)[1]))).size for f in frames
    }
    assert sizes == {(32, 21)}


def test_audio_goes_as_input_audio_to_a_judge_that_takes_audio(project, server, tmp_path):
    audio_write(tmp_path / "a.mp3", fmt="mp3")
    audio_write(tmp_path / "b.flac", fmt="flac")
    (pair,) = import_pairs(
        project, tmp_path, [media_pair("a1", "t2a", [["audio", "a.mp3"]], [["audio", "b.flac"]])]
    )
    (result,) = _judge_pairs(_judge(server, takes_audio=True), [pair])

    assert result.outcome == "ok", result.error
    (request,) = server.requests
    mp3, flac = input_audio_parts(request)
    # the MP3 goes as it is served to annotators: the same audio, none of its tags
    assert mp3["format"] == "mp3"
    mp3_bytes = base64.b64decode(mp3["data"])
    assert PLANTED.encode() not in mp3_bytes
    served = Media.objects.get(format="MP3")
    assert mp3_bytes == (tmp_path / "media" / served.served_relative_path).read_bytes()
    # FLAC is transcoded to WAV at its own rate: the 440 Hz tone is still there
    assert flac["format"] == "wav"
    rate, channels, samples = decoded_audio(flac)
    assert (rate, channels) == (16000, 1)
    assert abs(len(samples) - 3200) <= 16
    assert 0.45 < abs(samples).max() < 0.55
    assert PLANTED.encode() not in base64.b64decode(flac["data"])
    assert request.text.index("[Response 1]") < request.text.index("[Response 2]")


def test_a_judge_not_taking_audio_gets_a_named_permanent_error_and_no_call(
    project, server, tmp_path
):
    audio_write(tmp_path / "a.wav")
    grey_video(tmp_path / "v.mp4", frames=10)
    audio_pair, video_pair = import_pairs(
        project,
        tmp_path,
        [
            media_pair("a1", "t2a", [["audio", "a.wav"]], [["text", "none"]]),
            media_pair("v1", "t2v", [["video", "v.mp4"]], [["text", "none"]]),
        ],
    )
    refused, judged = _judge_pairs(_judge(server), [audio_pair, video_pair])

    assert refused.outcome == "skipped"
    assert not refused.transient
    assert refused.error == (
        "this pair has audio parts, and judge av-judge does not take audio (takes_audio is off)"
    )
    assert judged.outcome == "ok"
    assert server.request_count == 1  # only the video pair was sent
    assert not input_audio_parts(server.requests[0])


def test_audio_past_the_judges_limit_is_downmixed_then_refused(project, server, tmp_path, settings):
    audio_write(tmp_path / "a.ogg", fmt="ogg", seconds=0.2)  # Opus at 48 kHz
    (pair,) = import_pairs(
        project, tmp_path, [media_pair("a1", "t2a", [["audio", "a.ogg"]], [["text", "none"]])]
    )
    judge = _judge(server, takes_audio=True)
    settings.ARBITER_JUDGE_MAX_AUDIO_BYTES = 10_000  # 48 kHz WAV: 19 kB; 16 kHz mono: 6 kB
    (result,) = _judge_pairs(judge, [pair])
    assert result.outcome == "ok", result.error
    (sent,) = input_audio_parts(server.requests[0])
    assert sent["format"] == "wav"
    assert decoded_audio(sent)[:2] == (16000, 1)

    settings.ARBITER_JUDGE_MAX_AUDIO_BYTES = 2_000
    (result,) = _judge_pairs(judge, [pair])
    assert result.outcome == "error"
    assert not result.transient
    assert "exceeds the judges' limit of 2,000 bytes (ARBITER_JUDGE_MAX_AUDIO_BYTES)" in (
        result.error
    )
    assert server.request_count == 1


def test_a_missing_video_file_is_a_permanent_error_naming_it(project, server, tmp_path):
    grey_video(tmp_path / "v.mp4", frames=10)
    (pair,) = import_pairs(
        project, tmp_path, [media_pair("v1", "t2v", [["video", "v.mp4"]], [["text", "none"]])]
    )
    media = Media.objects.get(kind="video")
    (tmp_path / "media" / media.relative_path).unlink()
    (result,) = _judge_pairs(_judge(server), [pair])
    assert result.outcome == "error"
    assert not result.transient
    assert result.error == f"video {media.sha256[:12]} is missing"
    assert server.request_count == 0


def _omni_judge(server, **fields) -> Judge:
    return _judge(server, takes_audio=True, options={"max_retries": 0, "prompt": "omni"}, **fields)


def test_an_omni_t2a_pair_goes_as_one_clip_shown_first_then_silence_then_second(project, tmp_path):
    # Omni-RewardBench's run_exp_t2a.py: both clips at 16 kHz mono, one second of silence
    # between them, the prompt as text after the audio; B shown first in order BA.
    audio_write(tmp_path / "a.wav", seconds=0.2)
    audio_write(tmp_path / "b.flac", fmt="flac", seconds=0.5)
    (pair,) = import_pairs(
        project, tmp_path, [media_pair("t1", "t2a", [["audio", "a.wav"]], [["audio", "b.flac"]])]
    )
    with FakeOpenAI(Reply(content="Clip A sounds cleaner. [[A]]")) as server:
        judge = _omni_judge(server)
        (ab,) = _judge_pairs(judge, [pair], order="AB")
        (ba,) = _judge_pairs(judge, [pair], order="BA")
    assert (ab.outcome, ba.outcome) == ("ok", "ok"), (ab.error, ba.error)
    segments = {}
    for order, request in zip(("AB", "BA"), server.requests, strict=True):
        types = [part["type"] for part in request.content_parts]
        assert types == ["text", "input_audio", "text"], types
        (joined,) = input_audio_parts(request)
        assert joined["format"] == "wav"
        rate, channels, samples = decoded_audio(joined)
        assert (rate, channels) == (16000, 1)
        loud = np.flatnonzero(np.abs(samples) > 0.05)
        gap = np.flatnonzero(np.diff(loud) > 15000)
        assert len(gap) == 1, "one silence between the two clips"
        first_len = loud[gap[0]] + 1
        silence_end = loud[gap[0] + 1]
        segments[order] = (first_len, silence_end - first_len, len(samples) - silence_end)
        assert request.content_parts[2]["text"].startswith("[[PROMPT]]")
        assert "[[RESPONSE A]] first, then one second of silence" in request.text
        assert PLANTED.encode() not in base64.b64decode(joined["data"])
    # the 0.2 s clip (3,200 samples) is first in AB, the 0.5 s one (8,000) first in BA
    expected = {"AB": (3200, 16000, 8000), "BA": (8000, 16000, 3200)}
    for order, lengths in expected.items():
        assert np.allclose(segments[order], lengths, atol=40), segments


def test_an_omni_audio_pair_with_text_beside_a_clip_goes_as_two_clips(project, tmp_path):
    audio_write(tmp_path / "a.wav")
    audio_write(tmp_path / "b.wav", seconds=0.3)
    (pair,) = import_pairs(
        project,
        tmp_path,
        [media_pair("t1", "t2a", [["text", "My clip:"], ["audio", "a.wav"]], [["audio", "b.wav"]])],
    )
    with FakeOpenAI(Reply(content="[[B]]")) as server:
        (result,) = _judge_pairs(_omni_judge(server), [pair])
    assert result.outcome == "ok", result.error
    assert len(input_audio_parts(server.requests[0])) == 2


def test_a_joined_t2a_clip_past_the_judges_limit_is_an_error_naming_it(project, tmp_path, settings):
    audio_write(tmp_path / "a.wav", seconds=0.2)
    audio_write(tmp_path / "b.wav", seconds=0.2)
    (pair,) = import_pairs(
        project, tmp_path, [media_pair("t1", "t2a", [["audio", "a.wav"]], [["audio", "b.wav"]])]
    )
    # 0.2 + 1 + 0.2 s at 16 kHz is 22,400 samples: 44,844 bytes of WAV
    settings.ARBITER_JUDGE_MAX_AUDIO_BYTES = 40_000
    with FakeOpenAI(Reply(content="[[A]]")) as server:
        (result,) = _judge_pairs(_omni_judge(server), [pair])
        assert not server.requests
    assert result.outcome == "error"
    assert "joined with a second of silence exceed the judges' limit of 40,000 bytes" in (
        result.error
    )
