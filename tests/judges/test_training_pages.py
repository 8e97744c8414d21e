"""The Reward models pages: who may see and start trainings, the form's errors, the
progress fragment htmx polls, and the curves of a finished training."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from judges.models import TrainingRun
from judges.reward_model.services import training_run_create, training_run_execute
from judges.reward_model.trainer import TrainingOptions
from tests.judges.training_support import consensus_pairs_in, preference_pairs

pytestmark = pytest.mark.django_db

FORM = {
    "features": "hashed",
    "epochs": "4",
    "lr": "0.01",
    "batch_size": "32",
    "seed": "0",
    "patience": "2",
    "holdout": "0.2",
    "device": "cpu",
    "register": "",
}


@pytest.fixture
def consensus(project):
    return consensus_pairs_in(project, preference_pairs(80, seed=8))


def list_url(slug: str = "demo") -> str:
    return reverse("judges:training", args=[slug])


def test_outsider_gets_404_and_annotator_403(client_for, alice, eve, project, consensus):
    for user, code in ((eve, 404), (alice, 403)):
        client = client_for(user)
        assert client.get(list_url()).status_code == code
        assert client.post(list_url(), FORM).status_code == code
    run = training_run_create(project=project, options=TrainingOptions(), enqueue=False)
    detail = reverse("judges:training-run", args=["demo", run.pk])
    assert client_for(eve).get(detail).status_code == 404
    assert client_for(alice).get(detail).status_code == 403
    assert TrainingRun.objects.count() == 1


def test_another_projects_run_is_not_found(client_for, dave, other_project):
    other_project.memberships.create(user=dave, role="researcher")
    consensus_pairs_in(other_project, preference_pairs(8))
    run = training_run_create(project=other_project, options=TrainingOptions(), enqueue=False)
    assert (
        client_for(dave).get(reverse("judges:training-run", args=["demo", run.pk])).status_code
        == 404
    )


@pytest.mark.parametrize("persona", ["carol", "dave"])
def test_curators_and_researchers_start_a_training(
    request, client_for, project, consensus, persona
):
    user = request.getfixturevalue(persona)
    client = client_for(user)
    page = client.get(list_url())
    assert page.status_code == 200
    assert b"Start training" in page.content
    assert b"Reward models" in page.content  # the project navigation has the tab
    response = client.post(list_url(), {**FORM, "register": "demo-trained"})
    run = TrainingRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("judges:training-run", args=["demo", run.pk])
    assert (run.status, run.created_by, run.register_name, run.epochs) == (
        "pending",
        user,
        "demo-trained",
        4,
    )


def test_posting_needs_the_csrf_token(carol, project, consensus):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    assert client.post(list_url(), FORM).status_code == 403
    assert not TrainingRun.objects.exists()


def test_form_errors_name_the_field(client_for, carol, project):
    client = client_for(carol)
    response = client.post(list_url(), {**FORM, "epochs": "0", "holdout": "0.9"})
    assert response.status_code == 400
    form = response.context["form"]
    assert "epochs" in form.errors
    assert "holdout" in form.errors
    # no consensus yet: the source is refused in words
    response = client.post(list_url(), FORM)
    assert response.status_code == 400
    assert "no consensus pair with a side" in response.content.decode()
    assert not TrainingRun.objects.exists()


def test_a_finished_training_shows_its_curves_and_the_fragment(
    client_for, dave, project, consensus
):
    run = training_run_create(
        project=project,
        options=TrainingOptions(epochs=4, batch_size=16, lr=0.01),
        register_name="demo-rm",
        enqueue=False,
    )
    training_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"
    client = client_for(dave)
    detail = reverse("judges:training-run", args=["demo", run.pk])
    page = client.get(detail).content.decode()
    assert "Held-out accuracy per epoch" in page
    assert page.count("<svg") >= 3
    assert "registered as judge <strong>demo-rm</strong>" in page
    assert "hx-get" not in page  # finished: nothing to poll
    fragment = client.get(detail, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<section id="training-progress"')
    assert "<html" not in fragment
    listing = client.get(list_url()).content.decode()
    assert f"Training {run.pk}" in listing
    assert "demo-rm" in listing


def test_a_running_training_is_polled_and_errors_are_escaped(client_for, dave, project):
    consensus_pairs_in(project, preference_pairs(8))
    run = training_run_create(project=project, options=TrainingOptions(), enqueue=False)
    TrainingRun.objects.filter(pk=run.pk).update(status="running", progress=0.4, phase="training")
    detail = reverse("judges:training-run", args=["demo", run.pk])
    page = client_for(dave).get(detail).content.decode()
    assert f'hx-get="{detail}"' in page
    assert "40%" in page
    TrainingRun.objects.filter(pk=run.pk).update(status="failed", error="<script>x</script>")
    page = client_for(dave).get(detail).content.decode()
    assert "<script>x</script>" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page


def test_a_built_release_is_offered_as_the_source(client_for, carol, project, consensus):
    from annotation.releases.services import release_build, release_create

    release_create(project=project, version="0.9.0", selection=None, user=carol)  # a draft
    built = release_build(
        release=release_create(project=project, version="1.0.0", selection=None, user=carol)
    )
    client = client_for(carol)
    form = client.get(list_url()).context["form"]
    assert [value for value, _ in form.fields["source"].choices] == ["", "1.0.0"]
    assert client.post(list_url(), {**FORM, "source": "0.9.0"}).status_code == 400
    response = client.post(list_url(), {**FORM, "source": "1.0.0"})
    assert response.status_code == 302
    run = TrainingRun.objects.get()
    assert (run.source, run.release) == ("release", built)
    page = client.get(response["Location"]).content.decode()
    assert "Release 1.0.0 of demo" in page


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_fails_the_training_with_503(client_for, carol, project, monkeypatch):
    from kombu.exceptions import OperationalError

    from judges import tasks

    consensus_pairs_in(project, preference_pairs(8))

    def refuse(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(tasks.training_run_execute, "apply_async", refuse)
    response = client_for(carol).post(list_url(), FORM)
    assert response.status_code == 503
    assert "task queue is unreachable" in response.content.decode()
    run = TrainingRun.objects.get()
    assert run.status == "failed"
    assert "did not start" in run.error
