"""A filter run over mixed pairs (text, image, video, audio) on a real Celery worker (Redis):
the loopback OpenAI-compatible server sees each video as timestamped frames and each audio
clip as an input_audio part for the judge that takes audio, the judge that does not gets the
named permanent error for the audio pairs (and is never called on them), and a reward model
with media features votes on every pair (docs/judges.md, "Video and audio")."""

from __future__ import annotations

import base64
import re

import pytest

from judges.models import FilterRun, Judge, Verdict
from judges.reward_model.model import init_checkpoint
from judges.runs import services as runs
from tests.annotation.imports.conftest import image_bytes
from tests.annotation.media.conftest import PLANTED, audio_write
from tests.judges.av_judge_support import grey_video, import_pairs, media_pair
from tests.judges.fake_openai import FakeOpenAI, verdict
from tests.judges.test_run_worker import WORKER_ENV, assert_one_verdict_per_key, wait_for

_FRAME_LABEL = re.compile(r"^frame (\d+) of (\d+) at (\d+\.\d\d) s$")


def _mixed_pairs(project, tmp_path):
    (tmp_path / "red.png").write_bytes(image_bytes((200, 30, 30)))
    (tmp_path / "blue.png").write_bytes(image_bytes((30, 30, 200)))
    grey_video(tmp_path / "moving.mp4", frames=30, rate=10)
    grey_video(tmp_path / "short.mp4", frames=2, rate=10)
    audio_write(tmp_path / "tone.mp3", fmt="mp3")
    audio_write(tmp_path / "tone.flac", fmt="flac")
    return import_pairs(
        project,
        tmp_path,
        [
            media_pair("text", "t2t", [["text", "GOOD answer"]], [["text", "weak answer"]]),
            media_pair("image", "t2i", [["image", "red.png"]], [["image", "blue.png"]]),
            media_pair("video", "t2v", [["video", "moving.mp4"]], [["video", "short.mp4"]]),
            media_pair("audio", "t2a", [["audio", "tone.mp3"]], [["audio", "tone.flac"]]),
            media_pair(
                "video-prompt",
                "tv2t",
                [["text", "GOOD: a grey fade"]],
                [["text", "a red square"]],
                prompt=[["text", "What happens?"], ["video", "moving.mp4"]],
            ),
        ],
    )


@pytest.mark.timeout(180)
def test_a_worker_runs_a_filter_over_text_image_video_and_audio_pairs(
    celery_worker_process, project, tmp_path, checkpoint_root
):
    with FakeOpenAI(verdict("1")) as server:
        by_id = {pair.external_id: pair for pair in _mixed_pairs(project, tmp_path)}
        common = {
            "kind": "openai",
            "base_url": server.base_url,
            "timeout_s": 10,
            "options": {"max_retries": 0},
        }
        hears = Judge.objects.create(name="hears", model="hears", takes_audio=True, **common)
        deaf = Judge.objects.create(
            name="deaf", model="deaf", video_frames=4, video_frame_side=32, **common
        )
        init_checkpoint(checkpoint_root / "media.pt", media=True)
        scorer = Judge.objects.create(name="scorer", kind="reward_model", checkpoint="media.pt")
        celery_worker_process(
            extra_env={**WORKER_ENV, "ARBITER_CHECKPOINT_ROOT": str(checkpoint_root)}
        )
        run = runs.filter_run_create(project=project, judges=[hears, deaf, scorer])
        run = wait_for(run, timeout=150)
        requests = list(server.requests)

    assert run.status == FilterRun.Status.SUCCEEDED, run.error
    assert_one_verdict_per_key(run)
    verdicts = {
        (v.judge.name, v.pair.external_id, v.order): v
        for v in Verdict.objects.filter(run=run).select_related("judge", "pair")
    }
    for (judge, pair_id, _order), v in verdicts.items():
        if judge == "deaf" and pair_id == "audio":
            assert v.outcome == "skipped", v
            assert v.error == (
                "this pair has audio parts, and judge deaf does not take audio (takes_audio is off)"
            )
        else:
            assert v.outcome == "ok", (judge, pair_id, v.error)

    by_model: dict[str, list] = {"hears": [], "deaf": []}
    for request in requests:
        by_model[request.body["model"]].append(request)
    # deaf was never called on the audio pair; hears was, in both orders
    assert len(by_model["hears"]) == 2 * len(by_id)
    assert len(by_model["deaf"]) == 2 * (len(by_id) - 1)
    for model, frames in (("hears", 8), ("deaf", 4)):
        video_requests = [r for r in by_model[model] if "Video of" in r.text]
        assert len(video_requests) == 2 * 2  # the t2v pair and the video prompt, both orders
        for request in video_requests:
            labels = [
                _FRAME_LABEL.match(p["text"])
                for p in request.content_parts
                if p["type"] == "text" and _FRAME_LABEL.match(p["text"])
            ]
            counts = {int(m[2]) for m in labels}
            assert frames in counts
            assert counts <= {frames, 2}
            first = [float(m[3]) for m in labels if int(m[2]) == frames]
            assert first == sorted(first)
            assert first[0] == 0.0
            assert first[-1] == 2.9
    audio_requests = [r for r in by_model["hears"] if "Video of" not in r.text and any(
        p["type"] == "input_audio" for p in r.content_parts
    )]  # fmt: skip
    assert len(audio_requests) == 2
    for request in audio_requests:
        formats = [
            p["input_audio"]["format"] for p in request.content_parts if p["type"] == "input_audio"
        ]
        # the served copies are AAC in M4A, which the input_audio part does not take: both
        # clips go as WAV decoded from their originals, without their tags
        assert formats == ["wav", "wav"]
        for part in request.content_parts:
            if part["type"] == "input_audio":  # no tag naming a model reaches the judge
                assert PLANTED.encode() not in base64.b64decode(part["input_audio"]["data"])
    assert not any(p["type"] == "input_audio" for r in by_model["deaf"] for p in r.content_parts)
    assert run.summary["judges"]["deaf"]["skipped"] == 2
    assert run.summary["judges"]["deaf"]["error"] == 0
