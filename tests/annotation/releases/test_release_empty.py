"""A release whose selection takes no pair is refused, naming the sources and filters
(docs/releases.md, "Selection"), on the form, the API and the command line, and again when a
draft whose pairs are gone is built: a release of 0 rows is never a dataset."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.core.errors import InvalidInput
from annotation.models import Pair, Release
from annotation.releases.services import release_build_start, release_create
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db


def test_a_project_with_nothing_decided_has_no_release(project, dave):
    PairFactory(project=project, status="queued")
    with pytest.raises(InvalidInput, match=r"selection: no pair of demo matches it") as caught:
        release_create(project=project, version="1.0.0", selection={}, user=dave)
    assert "consensus and adjudicated pairs; no ties" in str(caught.value)
    assert not Release.objects.exists()


def test_the_refusal_names_each_filter_that_left_nothing(project, dave):
    PairFactory(project=project, status="consensus", consensus_label="A", task="text")
    selection = {"tasks": ["t2i"], "criteria": ["style"], "include_ties": True}
    with pytest.raises(InvalidInput) as caught:
        release_create(project=project, version="1.0.0", selection=selection, user=dave)
    assert "ties in; tasks: t2i; criteria: 'style'" in str(caught.value)
    assert release_create(project=project, version="1.0.0", selection={}, user=dave)


def test_a_minimum_agreement_no_pair_reaches_is_refused(project, dave):
    PairFactory(project=project, status="consensus", consensus_label="A")  # no votes
    with pytest.raises(InvalidInput, match=r"min_agreement: 0\.5\)"):
        release_create(
            project=project, version="1.0.0", selection={"min_agreement": 0.5}, user=dave
        )


def test_the_form_shows_the_refusal_and_makes_nothing(client_for, project, dave):
    response = client_for(dave).post(
        reverse("release-create", args=["demo"]),
        {"version": "1.0.0", "include_consensus": "on", "splits": "test=1", "seed": "0"},
    )
    assert response.status_code == 400, response.context["form"].errors
    assert "no pair of demo matches it" in response.content.decode()
    assert not Release.objects.exists()


def test_the_api_answers_400_naming_the_filters(api_for, project, dave):
    response = api_for(dave).post(
        "/api/v1/projects/demo/releases/",
        {"version": "1.0.0", "selection": {"include_ensemble": True}},
        format="json",
    )
    assert response.status_code == 400
    assert "consensus and adjudicated and ensemble-easy pairs" in str(response.json())
    assert not Release.objects.exists()


def test_the_command_line_refuses_it(project):
    with pytest.raises(CommandError, match="no pair of demo matches it"):
        call_command("create_release", "demo", "--version", "1.0.0", "--tasks", "code")
    assert not Release.objects.exists()


def test_building_a_draft_whose_pairs_are_gone_is_refused(client_for, api_for, project, dave):
    pair = PairFactory(project=project, status="consensus", consensus_label="A")
    release = release_create(project=project, version="1.0.0", selection={}, user=dave)
    Pair.objects.filter(pk=pair.pk).update(status="disputed")
    with pytest.raises(InvalidInput, match="no pair of demo matches it"):
        release_build_start(release=release)
    response = client_for(dave).post(reverse("release-build", args=["demo", "1.0.0"]), follow=True)
    assert response.status_code == 200
    assert "no pair of demo matches it" in response.content.decode()
    answer = api_for(dave).post("/api/v1/projects/demo/releases/1.0.0/build/")
    assert answer.status_code == 400
    assert "no pair of demo" in str(answer.json())
    release.refresh_from_db()
    assert release.status == Release.Status.DRAFT
