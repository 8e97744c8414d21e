"""The local reward-model judge: checkpoint format, batching, device handling."""

from __future__ import annotations

import json
import math

import pytest
import torch
from django.conf import settings

from judges.backends import get_backend
from judges.backends.reward_model import RewardModelBackend
from judges.core.images import image_stats
from judges.models import Judge
from judges.reward_model.model import (
    CheckpointError,
    RewardModel,
    ScoringInput,
    hash_tokens,
    init_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from tests.factories import JudgeFactory
from tests.judges.backend_helpers import image_part, item, noisy_image, store_image, text_part

SMALL = {"n_buckets": 4096, "embed_dim": 16, "hidden_dim": 32, "max_tokens": 64}


@pytest.fixture
def checkpoint(checkpoint_root):
    return init_checkpoint(checkpoint_root / "rm.pt", seed=7, **SMALL)


@pytest.fixture
def make_judge(db, checkpoint):
    def make(**fields) -> Judge:
        defaults = {"name": "rm", "kind": "reward_model", "checkpoint": str(checkpoint)}
        return JudgeFactory(**{**defaults, **fields})

    return make


INPUTS = [
    ScoringInput("Draw a red cat", "Here is a red cat sitting on a mat."),
    ScoringInput("Draw a red cat", "I cannot help with that."),
    ScoringInput("Summarise the text", ""),
    ScoringInput("Summarise the text", "A long summary " * 40),
    ScoringInput("¿Qué es esto?", "Это кошка. 这是一只猫。"),
]


def test_checkpoint_round_trip_keeps_weights_config_and_scores(checkpoint, tmp_path):
    model = load_checkpoint(checkpoint, "cpu")
    assert model.config["n_buckets"] == 4096
    assert model.config["tokenizer"] == "hashed-words-v1"
    again = load_checkpoint(save_checkpoint(model, tmp_path / "copy.pt", config=model.config))
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name])
    assert again.score(INPUTS) == model.score(INPUTS)
    saved = torch.load(checkpoint, weights_only=True)
    assert (saved["format"], saved["version"]) == ("arbiter-reward-model", 1)


def test_different_seeds_give_different_models(tmp_path):
    one = load_checkpoint(init_checkpoint(tmp_path / "a.pt", seed=1, **SMALL))
    two = load_checkpoint(init_checkpoint(tmp_path / "b.pt", seed=2, **SMALL))
    assert one.score(INPUTS) != two.score(INPUTS)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"format": "something-else", "version": 1}, "not an Arbiter reward-model checkpoint"),
        ([1, 2, 3], "not an Arbiter reward-model checkpoint"),
        ({"format": "arbiter-reward-model", "version": 99}, "version 99 is not supported"),
        (
            {"format": "arbiter-reward-model", "version": 1, "config": {"embed_dim": -3}},
            "config.embed_dim must be a positive integer",
        ),
        (
            {"format": "arbiter-reward-model", "version": 1, "config": {"tokenizer": "bpe"}},
            "config.tokenizer 'bpe' is not supported",
        ),
        (
            {"format": "arbiter-reward-model", "version": 1, "config": SMALL, "state_dict": {}},
            "weights do not match the config",
        ),
    ],
)
def test_bad_checkpoints_give_a_clear_error(tmp_path, payload, message):
    path = tmp_path / "bad.pt"
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=message) as caught:
        load_checkpoint(path)
    assert str(path) in str(caught.value)


def test_missing_and_non_torch_files_give_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_checkpoint(tmp_path / "absent.pt")
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        load_checkpoint(junk)


def test_pickled_code_is_refused(tmp_path):
    path = tmp_path / "pickled.pt"
    torch.save({"format": "arbiter-reward-model", "version": 1, "hook": RewardModel}, path)
    with pytest.raises(CheckpointError, match="not a readable torch checkpoint"):
        load_checkpoint(path)


def test_hashing_is_deterministic_and_lowercases_words():
    ids, offsets, words = hash_tokens(
        ["Red cat, red CAT!", "", "x"], n_buckets=1 << 20, max_tokens=10, bigrams=False
    )
    assert offsets.tolist() == [0, 4, 4]
    assert words.tolist() == [4, 0, 1]
    assert ids[0] == ids[2]
    assert ids[1] == ids[3]
    again, _, _ = hash_tokens(["red"], n_buckets=1 << 20, max_tokens=10, bigrams=False)
    assert again[0] == ids[0]  # not Python's per-process salted hash


def test_hashing_keeps_only_max_tokens_words_and_adds_bigrams():
    _, offsets, words = hash_tokens(
        ["one two three four five", "six"], n_buckets=1000, max_tokens=3, bigrams=True
    )
    assert words.tolist() == [3, 1]
    assert offsets.tolist() == [0, 5]  # 3 words + 2 bigrams, then "six"


def test_batched_scores_equal_unbatched(checkpoint):
    model = load_checkpoint(checkpoint)
    batched = model.score(INPUTS)
    one_by_one = [model.score([single])[0] for single in INPUTS]
    assert batched == pytest.approx(one_by_one, abs=1e-5)
    assert len(set(batched)) == len(INPUTS)


def test_backend_prefers_the_higher_reward_in_both_orders(make_judge, checkpoint):
    model = load_checkpoint(checkpoint)
    prompt = "Describe the picture"
    a, b = "A detailed description of a harbour at dusk.", "no"
    r_a, r_b = model.score([ScoringInput(prompt, a), ScoringInput(prompt, b)])
    backend = get_backend(make_judge())
    assert isinstance(backend, RewardModelBackend)
    ab, ba = backend.judge_batch(
        [item(a, b, order="AB", prompt=prompt), item(b, a, order="BA", prompt=prompt)]
    )
    better = "A" if r_a > r_b else "B"
    assert item(order="AB").canonical_side(ab.preferred) == better
    assert item(order="BA").canonical_side(ba.preferred) == better
    p = 1 / (1 + math.exp(-(r_a - r_b)))
    assert ab.confidence == pytest.approx(max(p, 1 - p), abs=1e-6)
    assert ba.confidence == pytest.approx(ab.confidence)
    assert ab.outcome == "ok"
    assert "r_first" in ab.raw


def test_backend_scores_each_distinct_response_once_per_batch(make_judge, monkeypatch):
    seen: list[int] = []
    original = RewardModel.score

    def counting(self, inputs):
        seen.append(len(inputs))
        return original(self, inputs)

    monkeypatch.setattr(RewardModel, "score", counting)
    backend = get_backend(make_judge(batch_size=3))
    items = []
    for n in range(4):
        a, b = f"answer a{n}", f"answer b{n}"
        items += [item(a, b, order="AB", pair_id=n), item(b, a, order="BA", pair_id=n)]
    results = backend.judge_batch(items)
    assert sum(seen) == 8  # 4 pairs x 2 distinct responses, though 16 were shown
    assert max(seen) <= 3  # in batches of judge.batch_size
    assert all(r.outcome == "ok" for r in results)


def test_backend_tie_only_when_allowed_and_close(make_judge):
    backend = get_backend(make_judge(options={"tie_margin": 0.5}))
    tied, forced = backend.judge_batch([item(allow_tie=True), item(allow_tie=False)])
    assert tied.preferred == "tie"
    assert forced.preferred in ("first", "second")


def test_backend_uses_image_statistics(make_judge):
    picture = store_image(noisy_image(32, 32, seed=3))
    blank = store_image(noisy_image(32, 32, seed=3).point(lambda _: 128))
    path = settings.MEDIA_ROOT / blank.relative_path
    assert image_stats([path])[path].is_blank
    backend = get_backend(make_judge())
    with_picture = [text_part("look"), image_part(picture.sha256)]
    with_blank = [text_part("look"), image_part(blank.sha256)]
    (result,) = backend.judge_batch([item(with_picture, with_blank)])
    assert result.outcome == "ok"
    rewards = json.loads(result.raw)
    assert rewards["r_first"] != rewards["r_second"]  # same text, different pixels


def test_an_unloadable_checkpoint_gives_errors_not_exceptions(make_judge, checkpoint_root):
    backend = get_backend(make_judge(checkpoint=str(checkpoint_root / "gone.pt")))
    results = backend.judge_batch([item(), item(order="BA")])
    assert [r.outcome for r in results] == ["error", "error"]
    assert all("no such checkpoint file" in r.error and not r.transient for r in results)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_a_clear_error(make_judge, checkpoint):
    with pytest.raises(CheckpointError, match="no CUDA device"):
        load_checkpoint(checkpoint, "cuda")
    (result,) = get_backend(make_judge(device="cuda")).judge_batch([item()])
    assert result.outcome == "error"
    assert "no CUDA device" in result.error


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_scores_match_cpu(checkpoint):
    cpu = load_checkpoint(checkpoint, "cpu").score(INPUTS)
    gpu_model = load_checkpoint(checkpoint, "cuda")
    assert gpu_model.device.type == "cuda"
    assert gpu_model.score(INPUTS) == pytest.approx(cpu, abs=1e-4)


def test_the_backend_loads_no_checkpoint_outside_the_root(make_judge, checkpoint_root, tmp_path):
    """A judge stored before the root was enforced: refused at load, the same for any path."""
    outside = init_checkpoint(tmp_path / "outside.pt", **SMALL)
    (checkpoint_root / "link.pt").symlink_to(outside)
    expected = f"Checkpoints must lie under ARBITER_CHECKPOINT_ROOT ({checkpoint_root.resolve()})"
    paths = [str(outside), "/etc/passwd", "../outside.pt", "link.pt", str(tmp_path / "no.pt")]
    for n, path in enumerate(paths):
        backend = get_backend(make_judge(name=f"rm-{n}", checkpoint=path))
        (result,) = backend.judge_batch([item()])
        assert (result.outcome, result.error, result.transient) == ("error", expected, False)
