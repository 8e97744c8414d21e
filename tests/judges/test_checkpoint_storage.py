"""Reward-model checkpoints with ARBITER_STORAGE=s3 against moto's S3 server
(docs/reward-models.md): a trained checkpoint and its metrics go to the bucket's
``checkpoints`` area and nothing stays on the worker's disk; the judge registered with it
loads it from a temporary download (removed afterwards) and scores a filter run."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from annotation.core import storage
from annotation.core.scratch import SCRATCH_PREFIX
from judges.models import Judge, TrainingRun, Verdict
from judges.reward_model.checkpoint import CheckpointError, checkpoint_local
from judges.reward_model.model import load_checkpoint
from judges.reward_model.services import training_run_create, training_run_execute
from judges.reward_model.trainer import TrainingOptions
from judges.roster.services import judge_check
from judges.runs import services as runs
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture
from tests.judges.training_support import consensus_pairs_in, preference_pairs

pytestmark = pytest.mark.django_db


def _work_folders() -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"))


def test_a_trained_checkpoint_goes_to_the_bucket_and_its_judge_loads_it_from_there(
    project,
    checkpoint_root,
    s3_storage,
    django_capture_on_commit_callbacks,
    celery_eager,  # noqa: F811
):
    consensus_pairs_in(project, preference_pairs(120, seed=6))
    before = _work_folders()
    run = training_run_create(
        project=project,
        options=TrainingOptions(epochs=3, batch_size=32, lr=0.01, seed=4),
        register_name="bucket-rm",
        enqueue=False,
    )
    run = training_run_execute(run_id=run.pk)
    assert run is not None
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    folder = f"trained/{project.slug}/run-{run.pk}"
    assert run.checkpoint == f"{folder}/model.pt"
    assert s3_storage.keys("checkpoints") == [
        f"{s3_storage.prefix}/checkpoints/{folder}/metrics.json",
        f"{s3_storage.prefix}/checkpoints/{folder}/model.pt",
    ]
    metrics = json.loads(storage.read_bytes("checkpoints", f"{folder}/metrics.json"))
    assert metrics["training_run"] == run.pk
    # Nothing on the worker's disk: no checkpoint folder, no work folder left.
    assert [p for p in checkpoint_root.rglob("*") if p.is_file()] == []
    assert _work_folders() == before

    with checkpoint_local(run.checkpoint) as local:
        downloaded = local
        assert load_checkpoint(local).meta["training_run"] == run.pk
    assert not downloaded.exists()
    judge = Judge.objects.get(name="bucket-rm")
    assert judge.checkpoint == run.checkpoint
    judge_check(judge)  # raises ValidationError when it cannot load
    new_pairs = consensus_pairs_in(
        project,
        [
            type(p)(key=f"new-{p.key}", group=p.group, chosen=p.chosen, rejected=p.rejected)
            for p in preference_pairs(2, seed=99)
        ],
        seed=3,
    )
    for row in new_pairs:
        row.status, row.consensus_label = "imported", ""
        row.save(update_fields=["status", "consensus_label"])
    with django_capture_on_commit_callbacks(execute=True):
        filter_run = runs.filter_run_create(project=project, judges=[judge], threshold=0.9)
    filter_run.refresh_from_db()
    assert filter_run.status == "succeeded"
    assert Verdict.objects.filter(run=filter_run, judge=judge, outcome="ok").count() == 4
    assert _work_folders() == before


def test_a_checkpoint_missing_from_the_bucket_is_named(checkpoint_root, s3_storage):
    missing = "trained/x/run-1/model.pt"
    with (
        pytest.raises(CheckpointError, match=re.escape(f"{missing}: no such checkpoint")),
        checkpoint_local(missing),
    ):
        pass
    with pytest.raises(CheckpointError, match="must lie under"), checkpoint_local("../a.pt"):
        pass
