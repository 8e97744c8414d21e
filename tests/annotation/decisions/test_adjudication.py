"""The adjudication queue and a pair's page, and the adjudicate API: who may see and decide,
what the curator sees (every vote, prior annotations, model names only on request), and how a
decision is recorded (an adjudication, never a vote; a new one supersedes, history kept)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotation.models import Adjudication, Pair, PairStatus, PriorAnnotation, Vote
from tests.annotation.queue.conftest import SECRET_MODEL_A, SECRET_MODEL_B, annotator, secret_pair

pytestmark = pytest.mark.django_db


def _disputed(project, n: int = 0, *, waiting_minutes: int = 0, **fields) -> Pair:
    """A pair at its cap with three votes that do not agree, one with a rationale and a time."""
    pair = secret_pair(
        project,
        n,
        status=PairStatus.DISPUTED,
        dispute_reason="no_majority",
        vote_count=3,
        decided_at=timezone.now() - timedelta(minutes=waiting_minutes),
        **fields,
    )
    for i, (side, value) in enumerate([("A", 3), ("B", 1), ("tie", 2)]):
        Vote.objects.create(
            pair=pair,
            annotator=annotator(project, f"judge{n}-{i}"),
            side=side,
            value=value,
            left_is_a=bool(i % 2),
            rationale="the lighthouse has no lamp" if i == 1 else "",
            time_on_task_ms=12_500 if i == 1 else None,
        )
    return pair


def _url(project, pair=None, action: str = "") -> str:
    base = f"/p/{project.slug}/adjudication/"
    if pair is None:
        return base + action
    return f"{base}{pair.pk}/{action}"


def test_who_may_see_and_decide(project, alice, carol, dave, eve, client_for):
    pair = _disputed(project)
    for user, page, pair_page in ((carol, 200, 200), (dave, 200, 200), (alice, 403, 403)):
        client = client_for(user)
        assert client.get(_url(project)).status_code == page, user
        assert client.get(_url(project, pair)).status_code == pair_page, user
    outsider = client_for(eve)
    assert outsider.get(_url(project)).status_code == 404
    assert outsider.get(_url(project, pair)).status_code == 404
    # Researchers read; only curators decide.
    researcher_page = client_for(dave).get(_url(project, pair)).content.decode()
    assert "data-decide-form" not in researcher_page
    assert "Re-apply" not in researcher_page
    decide = {"label": "A", "note": "clear"}
    for user, status in ((dave, 403), (alice, 403), (eve, 404)):
        assert client_for(user).post(_url(project, pair, "decide/"), decide).status_code == status
    assert not Adjudication.objects.exists()


def test_a_pair_of_another_project_is_404(project, other_project, carol, client_for):
    foreign = _disputed(other_project)
    assert client_for(carol).get(_url(project, foreign)).status_code == 404


def test_the_queue_lists_disputed_pairs_oldest_first_with_the_reason(project, carol, client_for):
    newer = _disputed(project, 1, waiting_minutes=5)
    older = _disputed(project, 2, waiting_minutes=50)
    decided = secret_pair(project, 3, status=PairStatus.CONSENSUS, consensus_label="A")
    page = client_for(carol).get(_url(project)).content.decode()
    assert page.index(older.external_id) < page.index(newer.external_id)
    assert decided.external_id not in page
    assert "no_majority" in page
    detail = client_for(carol).get(f"/p/{project.slug}/").content.decode()
    assert _url(project) in detail  # the project page links the queue for curators


def test_the_pair_page_shows_every_vote_and_hides_model_names_until_revealed(
    project, carol, client_for
):
    pair = _disputed(project)
    PriorAnnotation.objects.create(pair=pair, position=0, value=3, label="A")
    page = client_for(carol).get(_url(project, pair)).content.decode()
    for seen in ("judge0-0", "judge0-1", "judge0-2", "the lighthouse has no lamp", "12"):
        assert seen in page
    assert "prior #0" in page
    assert "Draw a lighthouse at dusk" in page
    assert "<kbd>1</kbd> A is better" in page
    assert "<kbd>3</kbd> B is better" in page
    assert SECRET_MODEL_A not in page
    assert SECRET_MODEL_B not in page

    # The reveal is a POST with the CSRF token, as htmx sends it from the page.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(carol)
    assert strict.post(_url(project, pair, "reveal/")).status_code == 403
    page = strict.get(_url(project, pair))
    token = page.cookies["csrftoken"].value
    fragment = strict.post(
        _url(project, pair, "reveal/"), HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token
    )
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert SECRET_MODEL_A in body
    assert SECRET_MODEL_B in body
    assert "<html" not in body


def _vote_cells(page: str) -> list[str]:
    """The Value cell of each row of the votes table, in order."""
    table = page.split('class="table adj-votes"', 1)[1].split("</table>", 1)[0]
    rows = table.split("<tbody>", 1)[1].split("<tr>")[1:]
    return [row.split("<td>")[2].split("</td>")[0] for row in rows]


def test_votes_and_priors_are_numbered_as_the_keys_count_a_on_the_left(project, carol, client_for):
    """One numbering on the page, the screen's: A is shown on the left, so 1 is A's end of the
    scale for the decision's keys, the votes and the prior annotations alike; never the
    canonical values, where 3 is A (likert6: 6)."""
    pair = _disputed(project)
    PriorAnnotation.objects.create(pair=pair, position=0, value=3, label="A")
    PriorAnnotation.objects.create(pair=pair, position=1, value=1, label="B")
    page = client_for(carol).get(_url(project, pair)).content.decode()
    assert "<kbd>1</kbd> A is better" in page
    assert "<kbd>3</kbd> B is better" in page
    assert "(1 = A better … 3 = B better)" in page  # the Value column's header
    assert _vote_cells(page) == ["1 · A better", "3 · B better", "2 · About the same"]
    assert "prior #0: 1 · A better" in page
    assert "prior #1: 3 · B better" in page

    project.scale = "likert6"
    project.save(update_fields=["scale"])
    likert = secret_pair(project, 9, status=PairStatus.DISPUTED, dispute_reason="no_majority")
    for i, (side, value) in enumerate([("A", 6), ("A", 4), ("B", 1)]):
        Vote.objects.create(
            pair=likert,
            annotator=annotator(project, f"likert{i}"),
            side=side,
            value=value,
            left_is_a=True,
        )
    page = client_for(carol).get(_url(project, likert)).content.decode()
    assert "(1 = A much better … 6 = B much better)" in page
    assert _vote_cells(page) == [
        "1 · A much better",
        "3 · A slightly better, or unsure",
        "6 · B much better",
    ]


def test_a_decision_needs_a_label_and_a_note(project, carol, client_for):
    pair = _disputed(project)
    client = client_for(carol)
    missing = client.post(_url(project, pair, "decide/"), {"label": "A", "note": "  "})
    assert missing.status_code == 400
    assert "note:" in missing.content.decode()
    wrong = client.post(_url(project, pair, "decide/"), {"label": "left", "note": "x"})
    assert wrong.status_code == 400
    assert "label:" in wrong.content.decode()
    assert Pair.objects.get(pk=pair.pk).status == PairStatus.DISPUTED


def test_deciding_moves_on_to_the_next_disputed_pair(project, carol, client_for):
    first = _disputed(project, 1, waiting_minutes=30)
    second = _disputed(project, 2, waiting_minutes=10)
    client = client_for(carol)
    response = client.post(_url(project, first, "decide/"), {"label": "tie", "note": "equal"})
    assert response.status_code == 302
    assert response.url == _url(project, second)
    response = client.post(_url(project, second, "decide/"), {"label": "B", "note": "no lamp"})
    assert response.url == _url(project)
    labels = dict(Pair.objects.values_list("external_id", "consensus_label"))
    assert (labels[first.external_id], labels[second.external_id]) == ("tie", "B")
    assert Vote.objects.count() == 6


def test_deciding_again_supersedes_and_keeps_the_history(project, carol, client_for):
    pair = _disputed(project)
    client = client_for(carol)
    client.post(_url(project, pair, "decide/"), {"label": "A", "note": "first look"})
    client.post(_url(project, pair, "decide/"), {"label": "B", "note": "zoomed in"})
    history = list(Adjudication.objects.filter(pair=pair).order_by("created_at", "pk"))
    assert [(a.label, a.superseded_at is None) for a in history] == [("A", False), ("B", True)]
    assert Pair.objects.get(pk=pair.pk).consensus_label == "B"
    page = client.get(_url(project, pair)).content.decode()
    assert "first look" in page
    assert "(superseded)" in page


def test_a_pair_that_is_not_disputed_is_not_adjudicated(project, carol, client_for, api_for):
    pair = secret_pair(project, status=PairStatus.CONSENSUS, consensus_label="A", vote_count=3)
    page = client_for(carol).post(_url(project, pair, "decide/"), {"label": "B", "note": "no"})
    assert page.status_code == 409
    assert "not disputed" in page.content.decode()
    api = api_for(carol)
    response = api.post(
        f"/api/v1/projects/{project.slug}/pairs/{pair.external_id}/adjudicate/",
        {"label": "B", "note": "no"},
        format="json",
    )
    assert response.status_code == 409
    assert "not disputed" in response.json()["detail"]
    assert Pair.objects.get(pk=pair.pk).consensus_label == "A"


def test_the_adjudicate_api(project, carol, dave, alice, eve, api_for):
    pair = _disputed(project)
    url = f"/api/v1/projects/{project.slug}/pairs/{pair.external_id}/adjudicate/"
    body = {"label": "A", "note": "the lamp is lit"}
    assert api_for(dave).post(url, body, format="json").status_code == 403
    assert api_for(alice).post(url, body, format="json").status_code == 403
    assert api_for(eve).post(url, body, format="json").status_code == 404
    bad = api_for(carol).post(url, {"label": "A"}, format="json")
    assert bad.status_code == 400
    assert "note" in bad.json()
    response = api_for(carol).post(url, body, format="json")
    assert response.status_code == 201
    assert {k: response.json()[k] for k in ("pair", "label", "note", "curator", "supersedes")} == {
        "pair": pair.external_id,
        "label": "A",
        "note": "the lamp is lit",
        "curator": "carol",
        "supersedes": 0,
    }
    again = api_for(carol).post(url, {"label": "tie", "note": "second look"}, format="json")
    assert again.status_code == 201
    assert again.json()["supersedes"] == 1
    assert Pair.objects.get(pk=pair.pk).consensus_label == "tie"


def test_binary_projects_cannot_decide_a_tie(project, carol, api_for):
    project.scale = "binary"
    project.save(update_fields=["scale"])
    pair = _disputed(project)
    response = api_for(carol).post(
        f"/api/v1/projects/{project.slug}/pairs/{pair.external_id}/adjudicate/",
        {"label": "tie", "note": "same"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"] == "label: tie is not possible on this project's binary scale."
