"""The leaderboard page: curators and researchers see the judges' scores on a target and
start evaluations; annotators get 403, outsiders 404; CSRF on the form; criteria escaped."""

from __future__ import annotations

import pytest
from django.test import Client

from judges.evaluation.judgement_import import judgements_import
from judges.evaluation.services import judge_evaluation_create
from judges.models import JudgeEvaluation
from tests.judges.evaluation_support import labelled_pairs
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]

URL = "/judges/p/demo/leaderboard/"


def test_a_researcher_sees_the_scores_charts_and_breakdowns(
    project, marker_judge, dave, client_for
):
    pairs = labelled_pairs(project, "AB")
    pairs[0].criterion = "<script>alert(1)</script>"
    pairs[0].save(update_fields=["criterion"])
    judgements_import(
        judge=marker_judge,
        project=project,
        lines=['{"pair": "text-0", "order": "AB", "verdict": "A"}'],
    )
    judge_evaluation_create(judge=marker_judge, project=project, call=False)
    page = client_for(dave).get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert "fake-judge" in html
    assert 'id="chart-accuracy-title"' in html
    assert 'id="chart-position-title"' in html
    assert "Dual accuracy per task: fake-judge" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert ">Leaderboard</a>" in html  # the project's tab


def test_the_form_starts_an_evaluation_and_names_a_bad_field(
    project, marker_judge, marker_server, carol, client_for, django_capture_on_commit_callbacks
):
    labelled_pairs(project, "AB")
    client = client_for(carol)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(URL, {"judge": "fake-judge", "release": "", "seed": "3"})
    assert answer.status_code == 302
    evaluation = JudgeEvaluation.objects.get()
    assert (evaluation.status, evaluation.seed) == ("succeeded", 3)
    refused = client.post(URL, {"judge": "nobody", "release": "", "seed": "0"})
    assert refused.status_code == 200
    assert "Select a valid choice" in refused.content.decode()


def test_annotators_get_403_outsiders_404_and_posts_need_csrf(
    project, marker_judge, alice, eve, dave, client_for
):
    labelled_pairs(project, "A")
    assert client_for(alice).get(URL).status_code == 403
    assert client_for(eve).get(URL).status_code == 404
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(dave)
    answer = strict.post(URL, {"judge": "fake-judge", "release": "", "seed": "0"})
    assert answer.status_code == 403
    assert not JudgeEvaluation.objects.exists()
