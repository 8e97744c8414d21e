"""The reward model's video and audio features (docs/judges.md, "reward_model"): durations and
signal statistics worked by hand, checkpoints from before them loading and scoring text and
images as before, and a training then a filter run over mixed text, image, video and audio
pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from annotation.models import Media, Pair, PairStatus
from judges.backends import get_backend
from judges.backends.base import judge_judgeable
from judges.backends.media_stats import (
    N_MEDIA_FEATURES,
    AudioStats,
    VideoStats,
    audio_stats,
    media_features,
    video_stats,
)
from judges.core.images import ImageStats
from judges.models import FilterRun, Judge, Verdict
from judges.reward_model.data import consensus_pairs
from judges.reward_model.model import (
    N_NUMERIC,
    ScoringInput,
    init_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from judges.reward_model.trainer import TrainingOptions, train
from judges.runs import services as runs
from tests.annotation.imports.conftest import image_bytes
from tests.annotation.media.conftest import audio_write
from tests.judges.av_judge_support import (
    GREY_STEP,
    grey_video,
    import_pairs,
    media_pair,
    silent_wav,
)
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

SMALL = {"n_buckets": 4096, "embed_dim": 16, "hidden_dim": 32}


def test_audio_statistics_come_from_the_waveform_peaks():
    media = Media(
        sha256="a" * 64, kind="audio", format="WAV", width=0, height=0, size_bytes=1,
        duration_seconds=2.0, sample_rate=16000, channels=1, peaks=[0.5, 0.0, 0.005, 1.0],
    )  # fmt: skip
    stats = audio_stats(media)
    assert stats.rms == pytest.approx(math.sqrt((0.25 + 0.000025 + 1.0) / 4))
    assert (stats.peak, stats.silence, stats.duration_s, stats.sample_rate) == (1.0, 0.5, 2, 16000)
    assert stats.as_features() == pytest.approx(
        [math.log1p(2.0) / 5, 16000 / 48000, 0.5, stats.rms, 1.0, 0.5]
    )


@pytest.mark.django_db
def test_video_statistics_measure_motion_between_sampled_frames(project, tmp_path):
    grey_video(tmp_path / "moving.mp4", frames=40, rate=10)
    grey_video(tmp_path / "still.mp4", frames=40, rate=10, step=0)
    import_pairs(
        project,
        tmp_path,
        [media_pair("v", "t2v", [["video", "moving.mp4"]], [["video", "still.mp4"]])],
    )
    moving, still = (
        video_stats(Media.objects.get(kind="video", size_bytes=(tmp_path / name).stat().st_size))
        for name in ("moving.mp4", "still.mp4")
    )
    # frames 0, 13, 26 and 39 sampled: 13 grey steps between each
    assert moving.motion == pytest.approx(13 * GREY_STEP / 255, abs=0.02)
    assert still.motion == pytest.approx(0.0, abs=0.005)
    assert (moving.duration_s, moving.frame_rate, moving.pixels) == (4.0, 10.0, 96 * 64)


def test_media_columns_average_each_kind_and_count_the_unreadable():
    video = VideoStats(duration_s=4.0, frame_rate=10.0, pixels=6144, motion=0.3)
    audio = AudioStats(duration_s=1.0, sample_rate=48000, channels=2, rms=0.4, peak=0.9, silence=0)
    columns = media_features((video, None), (audio,))
    assert len(columns) == N_MEDIA_FEATURES
    assert columns[:6] == pytest.approx([math.log1p(2), 0.5, *video.as_features()])
    assert columns[6:] == pytest.approx([math.log1p(1), 0.0, *audio.as_features()])
    assert media_features((), ()) == [0.0] * N_MEDIA_FEATURES


RED = ImageStats((0.5, 0.1, 0.1), (0.2,) * 3, 0.1, 0.05)
INPUTS = [
    ScoringInput("Draw a red cat", "Here is a red cat.", (RED,)),
    ScoringInput(
        "Make a tune", "",
        videos=(VideoStats(4.0, 10.0, 6144, 0.3),),
        audios=(AudioStats(1.0, 48000, 2, 0.4, 0.9, 0.0),),
    ),
]  # fmt: skip


def test_a_checkpoint_from_before_media_features_loads_and_keeps_its_columns(tmp_path):
    old = tmp_path / "old.pt"
    init_checkpoint(old, seed=1, **SMALL)
    payload = torch.load(old, weights_only=True)
    del payload["config"]["media"]  # as written before the key existed
    torch.save(payload, old)
    model = load_checkpoint(old)
    assert model.uses_media is False
    assert model.n_numeric == N_NUMERIC == 12
    numeric = model.featurize(INPUTS)[-1].numpy()
    assert numeric.shape == (2, 12)
    assert len(model.score(INPUTS)) == 2

    new = load_checkpoint(init_checkpoint(tmp_path / "new.pt", seed=1, media=True, **SMALL))
    wide = new.featurize(INPUTS)[-1].numpy()
    assert wide.shape == (2, 12 + N_MEDIA_FEATURES)
    # the columns text and images had are the same numbers; media columns follow them
    np.testing.assert_array_equal(wide[:, :12], numeric)
    np.testing.assert_allclose(wide[0, 12:], 0.0)
    np.testing.assert_allclose(
        wide[1, 12:], media_features(INPUTS[1].videos, INPUTS[1].audios), rtol=1e-6
    )


def _mixed_consensus(project, tmp_path) -> list[Pair]:
    """Twelve pairs on twelve prompts: text, image, video and audio, chosen on either side."""
    (tmp_path / "sharp.png").write_bytes(image_bytes((200, 30, 30), size=(32, 32)))
    (tmp_path / "blank.png").write_bytes(image_bytes((255, 255, 255), size=(32, 32)))
    grey_video(tmp_path / "moving.mp4", frames=20, rate=10)
    grey_video(tmp_path / "still.mp4", frames=20, rate=10, step=0)
    audio_write(tmp_path / "tone.wav")
    silent_wav(tmp_path / "silence.wav")
    good = {
        "t2t": (["text", "A clear, correct and complete explanation."], ["text", "No idea."]),
        "t2i": (["image", "sharp.png"], ["image", "blank.png"]),
        "t2v": (["video", "moving.mp4"], ["video", "still.mp4"]),
        "t2a": (["audio", "tone.wav"], ["audio", "silence.wav"]),
    }
    records, labels = [], {}
    for n in range(12):
        task = ("t2t", "t2i", "t2v", "t2a")[n % 4]
        better, worse = good[task]
        first, second = ([better], [worse]) if n % 2 == 0 else ([worse], [better])
        pair = media_pair(f"{task}-{n}", task, first, second, prompt=[["text", f"Prompt {n}"]])
        records.append(pair)
        labels[pair["id"]] = "A" if n % 2 == 0 else "B"
    pairs = import_pairs(project, tmp_path, records)
    for pair in pairs:
        Pair.objects.filter(pk=pair.pk).update(
            status=PairStatus.CONSENSUS, consensus_label=labels[pair.external_id]
        )
    return pairs


@pytest.mark.django_db
def test_training_then_a_filter_run_over_mixed_pairs(
    project,
    tmp_path,
    checkpoint_root,
    celery_eager,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    _mixed_consensus(project, tmp_path)
    data = consensus_pairs(project)
    assert data.source["pairs"] == 12
    by_key = {pair.key: pair for pair in data.pairs}
    audio = by_key["t2a-3"]
    assert audio.chosen.audios[0].rms > 0.3
    assert audio.rejected.audios[0].silence == 1.0
    video = by_key["t2v-2"]
    assert video.chosen.videos[0].motion > 0.1
    assert video.rejected.videos[0].motion < 0.01

    options = TrainingOptions(epochs=40, lr=0.02, batch_size=4, patience=40, seed=0, holdout=0.25)
    result = train(data.pairs, options, model_config=SMALL)
    assert result.config["media"] is True
    scores = result.model.score
    for key in ("t2v-2", "t2v-6", "t2a-3", "t2a-7"):
        chosen, rejected = scores([by_key[key].chosen, by_key[key].rejected])
        assert chosen > rejected, key
    save_checkpoint(result.model, checkpoint_root / "mixed.pt", config=result.config)

    judge = Judge.objects.create(name="mixed", kind="reward_model", checkpoint="mixed.pt")
    Pair.objects.filter(project=project).update(status=PairStatus.IMPORTED, consensus_label="")
    with django_capture_on_commit_callbacks(execute=True):
        run = runs.filter_run_create(project=project, judges=[judge])
    run.refresh_from_db()
    assert run.status == FilterRun.Status.SUCCEEDED, run.error
    verdicts = Verdict.objects.filter(run=run)
    assert verdicts.count() == 24
    assert set(verdicts.values_list("outcome", flat=True)) == {"ok"}


@pytest.mark.django_db
def test_a_reward_model_without_media_features_refuses_video_and_audio_pairs(
    project, tmp_path, checkpoint_root
):
    grey_video(tmp_path / "v.mp4", frames=10)
    audio_write(tmp_path / "a.wav")
    video, audio, text = import_pairs(
        project,
        tmp_path,
        [
            media_pair("v", "t2v", [["video", "v.mp4"]], [["text", "none"]]),
            media_pair("a", "t2a", [["audio", "a.wav"]], [["text", "none"]]),
            media_pair("t", "t2t", [["text", "one"]], [["text", "two"]]),
        ],
    )
    init_checkpoint(checkpoint_root / "old.pt", **SMALL)
    init_checkpoint(checkpoint_root / "new.pt", media=True, **SMALL)
    items = [runs.judge_item(pair, "AB", allow_tie=False) for pair in (video, audio, text)]
    for name, expected in (("old", ["skipped", "skipped", "ok"]), ("new", ["ok", "ok", "ok"])):
        judge = Judge.objects.create(name=name, kind="reward_model", checkpoint=f"{name}.pt")
        backend = get_backend(judge)
        try:
            results = judge_judgeable(backend, items)
        finally:
            backend.close()
        assert [r.outcome for r in results] == expected, [r.error for r in results]
        if name == "old":
            assert results[0].error == (
                "this pair has video parts, which judge old is not sent: its checkpoint has no "
                "media features (config.media is false; train it again)"
            )
            assert not results[1].transient
