"""Judge evaluations over the REST API: curators and researchers only (annotators 403,
outsiders 404), the leaderboard, the import, CSRF on session posts."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.judges.evaluation_support import labelled_pairs
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]

URL = "/api/v1/projects/demo/judge-evaluations/"
IMPORT_URL = "/api/v1/projects/demo/judgements/import/"


def upload(lines: list[dict]) -> SimpleUploadedFile:
    body = "\n".join(json.dumps(line) for line in lines).encode()
    return SimpleUploadedFile("answers.jsonl", body, content_type="application/jsonl")


def test_a_researcher_starts_an_evaluation_and_reads_the_leaderboard(
    project, marker_judge, marker_server, dave, api_for, django_capture_on_commit_callbacks
):
    labelled_pairs(project, "AB")
    api = api_for(dave)
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(URL, {"judge": "fake-judge"}, format="json")
    assert started.status_code == 202, started.content
    assert started.json()["target"] == "demo"
    detail = api.get(f"{URL}{started.json()['id']}/")
    assert detail.json()["status"] == "succeeded"
    assert detail.json()["results"]["overall"]["dual_accuracy"]["value"] == 1.0
    board = api.get(URL)
    assert [row["judge"] for row in board.json()] == ["fake-judge"]
    assert api.get(URL, {"release": "1.0.0"}).json() == []


def test_bad_input_names_the_field(project, marker_judge, carol, api_for, other_project):
    labelled_pairs(project, "A")
    api = api_for(carol)
    assert "judge" in api.post(URL, {"judge": "nobody"}, format="json").json()
    refused = api.post(URL, {"judge": "fake-judge", "release": "2.0.0"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["release"] == ["No release demo@2.0.0."]
    marker_judge.projects.set([other_project])  # another project's judge is unknown here
    assert "judge" in api.post(URL, {"judge": "fake-judge"}, format="json").json()


def test_judgements_import_over_the_api_with_line_numbered_errors(
    project, marker_judge, carol, api_for
):
    labelled_pairs(project, "A")
    api = api_for(carol)
    good = upload([{"pair": "text-0", "order": "AB", "verdict": "A"}])
    answer = api.post(IMPORT_URL, {"judge": "fake-judge", "file": good}, format="multipart")
    assert answer.status_code == 201
    assert answer.json() == {"imported": 1}
    bad = upload([{"pair": "text-0", "order": "AB", "verdict": "A"}, {"pair": "x", "order": "BA"}])
    answer = api.post(IMPORT_URL, {"judge": "fake-judge", "file": bad}, format="multipart")
    assert answer.status_code == 400
    assert "line 2: verdict: give a verdict" in answer.json()["detail"]


@pytest.mark.parametrize("method", ["get", "post"])
def test_annotators_get_403_and_outsiders_404(project, marker_judge, alice, eve, api_for, method):
    labelled_pairs(project, "A")
    for user, expected in ((alice, 403), (eve, 404)):
        api = api_for(user)
        for url in (URL, IMPORT_URL):
            if method == "get" and url == IMPORT_URL:
                continue
            answer = getattr(api, method)(url, {"judge": "fake-judge"})
            assert answer.status_code == expected, (user.username, url)


def test_an_evaluation_of_another_project_is_not_found(
    project, other_project, marker_judge, dave, api_for
):
    from judges.evaluation.services import judge_evaluation_create

    labelled_pairs(other_project, "A")
    evaluation = judge_evaluation_create(judge=marker_judge, project=other_project, call=False)
    assert api_for(dave).get(f"{URL}{evaluation.pk}/").status_code == 404
    assert api_for(dave).post(f"{URL}{evaluation.pk}/resume/").status_code == 404


def test_session_posts_need_the_csrf_token(project, marker_judge, dave):
    labelled_pairs(project, "A")
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(dave)
    assert api.post(URL, {"judge": "fake-judge"}, format="json").status_code == 403
