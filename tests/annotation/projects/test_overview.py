"""The Overview (the project page) and the home page: curators and researchers see the
project's progress per task, its pairs by status, the votes of today and what to do next;
annotators see what is left for them, never the project's totals."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.models import PairStatus
from tests.factories import PairFactory

pytestmark = pytest.mark.django_db


def vote_through_the_api(api, project, choice: str = "left") -> None:
    claim = api.post(f"/api/v1/projects/{project.slug}/claim/")
    assert claim.status_code == 200, claim.content
    vote = api.post(f"/api/v1/assignments/{claim.json()['id']}/vote/", {"choice": choice})
    assert vote.status_code == 201, vote.content


@pytest.fixture
def busy_project(project, alice, bob, api_for):
    """12 imported pairs, 5 disputed, 1 with the judges, and 4 t2i pairs with the annotators
    on which bob has voted twice."""
    PairFactory.create_batch(12, project=project, task="text")
    PairFactory.create_batch(5, project=project, task="text", status=PairStatus.DISPUTED)
    PairFactory(project=project, task="text", status=PairStatus.JUDGING)
    PairFactory.create_batch(4, project=project, task="t2i", status=PairStatus.QUEUED)
    api = api_for(bob)
    vote_through_the_api(api, project)
    vote_through_the_api(api, project, "right")
    return project


def overview(client, project) -> str:
    response = client.get(reverse("project-detail", args=[project.slug]))
    assert response.status_code == 200
    return re.sub(r"\s+", " ", response.content.decode())


def test_curator_sees_what_to_do_next_with_links(client_for, carol, busy_project):
    body = overview(client_for(carol), busy_project)
    slug = busy_project.slug
    runs, queue = reverse("judges:runs", args=[slug]), reverse("curator-queue", args=[slug])
    adjudication = reverse("adjudication", args=[slug])
    assert (
        f'12 pairs imported: <a href="{runs}">run the judges</a> or '
        f'<a href="{queue}#controls-heading">enqueue</a>.' in body
    )
    assert f'5 pairs disputed: <a href="{adjudication}">adjudicate</a>.' in body
    assert f'1 pair with the judges: <a href="{runs}">follow the run</a>.' in body
    assert f'4 pairs with the annotators: <a href="{queue}">watch the queue</a>.' in body


def test_curator_sees_progress_per_task_pairs_by_status_and_votes_today(
    client_for, carol, busy_project
):
    body = overview(client_for(carol), busy_project)
    t2i = body.split('<th scope="row">t2i</th>', 1)[1].split("</tr>", 1)[0]
    # 4 pairs of 3 votes each: 12 needed, 2 in
    assert '<td class="num">4</td> <td class="num">0</td>' in t2i
    assert '<progress value="2" max="12"' in t2i
    assert "2 of 12" in t2i
    text = body.split('<th scope="row">text</th>', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">18</td>' in text
    assert '<progress value="0" max="15"' in text  # only the disputed pairs reached annotators
    status = body.split('id="status-heading"', 1)[1]
    for label, count in (("Imported", 12), ("Disputed", 5), ("Queued", 2), ("Annotating", 2)):
        assert re.search(rf'<th scope="row">{label}</th> <td class="num">{count}</td>', status)
    assert '<th scope="row">Total</th><td class="num">22</td>' in status
    assert "<strong>2</strong> votes today" in body


def test_researcher_sees_the_overview_without_curator_links(client_for, dave, busy_project):
    body = overview(client_for(dave), busy_project)
    assert "12 pairs imported." in body
    assert "5 pairs disputed." in body
    assert reverse("curator-queue", args=[busy_project.slug]) not in body
    assert reverse("adjudication", args=[busy_project.slug]) not in body
    assert "Progress per task" in body


def test_annotator_sees_only_what_is_left_for_them(client_for, api_for, alice, busy_project):
    vote_through_the_api(api_for(alice), busy_project)
    body = overview(client_for(alice), busy_project)
    # 4 open pairs, one of which alice voted on
    assert "<strong>3</strong> pairs left for you · 1 done today · 1 in total" in body
    assert f'href="{reverse("annotate", args=[busy_project.slug])}"' in body
    for curator_data in ("Pairs by status", "Progress per task", "imported", "disputed", ">22<"):
        assert curator_data not in body


def test_annotator_with_nothing_left_is_told_so(client_for, alice, project):
    body = overview(client_for(alice), project)
    assert "Nothing is left for you right now" in body


def test_a_new_project_says_to_import(client_for, carol, project):
    body = overview(client_for(carol), project)
    assert (
        f'No pairs yet: <a href="{reverse("imports", args=[project.slug])}">import some</a>.'
        in (body)
    )


def test_every_pair_decided(client_for, carol, project):
    PairFactory(project=project, status=PairStatus.EASY)
    assert "Every pair is decided." in overview(client_for(carol), project)


def test_overview_takes_a_fixed_number_of_queries(
    client_for, carol, busy_project, django_assert_max_num_queries
):
    client = client_for(carol)
    overview(client, busy_project)  # the session and permissions are warm
    PairFactory.create_batch(30, project=busy_project, task="edit")
    with django_assert_max_num_queries(6):
        overview(client, busy_project)


def test_outsider_gets_404(client_for, eve, project):
    assert client_for(eve).get(reverse("project-detail", args=[project.slug])).status_code == 404


# Home page --------------------------------------------------------------------------------


def test_home_tells_an_annotator_what_is_left_for_them_not_the_project_total(
    client_for, api_for, alice, busy_project
):
    vote_through_the_api(api_for(alice), busy_project)
    body = re.sub(r"\s+", " ", client_for(alice).get(reverse("home")).content.decode())
    assert "<strong>3</strong> pairs left for you" in body
    assert "of 22" not in body
    assert "open for annotation" not in body


def test_home_shows_curators_the_project_counts(client_for, carol, busy_project):
    body = client_for(carol).get(reverse("home")).content.decode()
    assert "4 of 22 pairs open for annotation" in body
