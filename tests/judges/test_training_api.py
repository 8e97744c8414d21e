"""Trainings over the REST API: start one, read it, refused to outsiders and annotators,
bad options named; and one training run through a real Celery worker on the training queue."""

from __future__ import annotations

import time

import pytest

from judges.models import Judge, TrainingRun
from judges.reward_model.services import training_run_create
from judges.reward_model.trainer import TrainingOptions
from tests.factories import JudgeFactory
from tests.judges.training_support import consensus_pairs_in, preference_pairs

URL = "/api/v1/projects/demo/training-runs/"


@pytest.fixture
def consensus(project):
    return consensus_pairs_in(project, preference_pairs(60, seed=5))


@pytest.mark.django_db
def test_researcher_starts_and_reads_a_training(api_for, dave, project, consensus):
    api = api_for(dave)
    response = api.post(URL, {"epochs": 3, "seed": 9, "register": "api-rm"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["epochs"], body["seed"], body["features"]) == (
        "pending",
        3,
        9,
        "hashed",
    )
    assert body["register_name"] == "api-rm"
    assert body["history"] == []
    run = TrainingRun.objects.get()
    assert run.created_by == dave
    detail = api.get(f"{URL}{run.pk}/")
    assert detail.status_code == 200
    assert detail.json()["id"] == run.pk
    assert [row["id"] for row in api.get(URL).json()] == [run.pk]


@pytest.mark.django_db
def test_outsiders_and_annotators_are_refused(api_for, alice, eve, project, consensus):
    run = training_run_create(project=project, options=TrainingOptions(), enqueue=False)
    for user, code in ((eve, 404), (alice, 403)):
        api = api_for(user)
        assert api.get(URL).status_code == code
        assert api.post(URL, {}, format="json").status_code == code
        assert api.get(f"{URL}{run.pk}/").status_code == code
    assert TrainingRun.objects.count() == 1


@pytest.mark.django_db
def test_bad_options_are_named(api_for, carol, project, consensus):
    api = api_for(carol)
    response = api.post(URL, {"epochs": 0, "features": "bert"}, format="json")
    assert response.status_code == 400
    assert set(response.json()) >= {"epochs", "features"}
    JudgeFactory(name="taken")
    response = api.post(URL, {"register": "taken"}, format="json")
    assert response.status_code == 400
    assert "exists already" in str(response.json())
    assert not TrainingRun.objects.exists()


@pytest.mark.redis
def test_a_real_worker_on_the_training_queue_trains_and_records_each_epoch(
    celery_worker_process, project, settings, tmp_path
):
    from django.db import transaction

    root = tmp_path / "worker-checkpoints"
    root.mkdir()
    settings.ARBITER_CHECKPOINT_ROOT = root
    consensus_pairs_in(project, preference_pairs(120, seed=2))
    worker = celery_worker_process(
        queues="training", concurrency=1, extra_env={"ARBITER_CHECKPOINT_ROOT": str(root)}
    )
    with transaction.atomic():
        run = training_run_create(
            project=project,
            options=TrainingOptions(epochs=4, batch_size=16, lr=0.01),
            register_name="worker-rm",
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.finished:
            break
        time.sleep(0.5)
    assert run.status == "succeeded", (run.error, worker.log()[-3000:])
    assert len(run.history) >= 1
    assert run.progress == 1.0
    assert run.checkpoint.startswith(str(root))
    assert list(root.glob("trained/demo/*/model.pt"))
    assert Judge.objects.get(name="worker-rm").checkpoint == run.checkpoint


@pytest.mark.django_db
def test_a_release_is_named_by_its_version(api_for, carol, project, consensus):
    from annotation.releases.services import release_build, release_create

    built = release_build(
        release=release_create(project=project, version="1.2.3", selection=None, user=carol)
    )
    api = api_for(carol)
    response = api.post(URL, {"release": "1.2.3"}, format="json")
    assert response.status_code == 201
    assert response.json()["release"] == "1.2.3"
    assert TrainingRun.objects.get().release == built
    response = api.post(URL, {"release": "9.9.9"}, format="json")
    assert response.status_code == 400
    assert "no release 9.9.9" in str(response.json())
    assert api.post(URL, {"release": "1.2"}, format="json").status_code == 400


@pytest.mark.django_db
def test_unknown_fields_are_refused_by_name(api_for, carol, project, consensus):
    response = api_for(carol).post(URL, {"epochs": 2, "out": "/tmp/elsewhere"}, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["out"]
    assert "Unknown field" in response.json()["out"][0]
    assert not TrainingRun.objects.exists()


@pytest.mark.django_db
def test_the_checkpoint_is_shown_under_the_root_never_as_the_servers_path(
    api_for, dave, project, consensus, checkpoint_root
):
    run = training_run_create(project=project, options=TrainingOptions(), enqueue=False)
    run.checkpoint = str(checkpoint_root / "runs" / f"run-{run.pk}" / "model.pt")
    run.save(update_fields=["checkpoint"])
    shown = api_for(dave).get(f"{URL}{run.pk}/").json()["checkpoint"]
    assert shown == f"runs/run-{run.pk}/model.pt"
    run.checkpoint = "/srv/private/somewhere/rm/model.pt"  # written by the command line
    run.save(update_fields=["checkpoint"])
    assert api_for(dave).get(URL).json()[0]["checkpoint"] == "rm/model.pt"
