"""The pair page: everything known about one pair, for curators and researchers only; prev/next
follow the browser's filter; the judges' section comes from the judges app's registration."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from annotation.core.media_keys import media_path
from annotation.models import PairStatus, PriorAnnotation, Skip
from judges.models import Verdict
from tests.annotation.queue.conftest import SECRET_MODEL_A, SECRET_MODEL_B, secret_pair
from tests.factories import (
    FilterRunFactory,
    JudgeFactory,
    PairFactory,
    ProjectFactory,
    VoteFactory,
    make_prompt,
)


def pair_url(pair, query: str = "") -> str:
    url = reverse("pair", args=[pair.project.slug, pair.pk])
    return f"{url}?{query}" if query else url


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.fixture
def judged(project, alice, bob):
    """A ternary pair at consensus with two votes, a prior annotation, a skip, and verdicts of
    one judge in both orders."""
    pair = secret_pair(
        project, 1, with_images=True, status=PairStatus.CONSENSUS, consensus_label="A"
    )
    # Alice saw A on the left and chose left; Bob saw B on the left and chose left (= B).
    VoteFactory(pair=pair, annotator=alice, rationale="sharper lettering", time_on_task_ms=4200)
    VoteFactory(pair=pair, annotator=bob, side="B", left_is_a=False)
    PriorAnnotation.objects.create(pair=pair, position=0, value=5, label="A")
    Skip.objects.create(pair=pair, annotator=bob, reason="broken", note="image 2 is blank")
    judge = JudgeFactory(name="gpt-judge", kind="openai")
    run = FilterRunFactory(project=project, threshold=0.9)
    for order, side, why in (("AB", "A", "A reads the sign right"), ("BA", "B", "B is brighter")):
        Verdict.objects.create(
            run=run, judge=judge, pair=pair, order=order, outcome="ok", side=side, reasoning=why
        )
    return pair


def test_who_may_see_a_pair(client_for, alice, carol, dave, eve, project, judged):
    url = pair_url(judged)
    assert client_for(eve).get(url).status_code == 404
    assert client_for(alice).get(url).status_code == 403
    assert client_for(dave).get(url).status_code == 200
    assert client_for(carol).get(url).status_code == 200


def test_another_projects_pair_is_not_found(client_for, carol, project):
    elsewhere = PairFactory(project=ProjectFactory(slug="elsewhere"))
    url = reverse("pair", args=[project.slug, elsewhere.pk])
    assert client_for(carol).get(url).status_code == 404


def test_the_page_shows_content_votes_priors_skips_and_verdicts(client_for, dave, judged):
    response = client_for(dave).get(pair_url(judged))
    html = response.content.decode()
    text = text_of(response)
    assert "Draw a lighthouse at dusk, variant 1" in text
    assert f"A · {SECRET_MODEL_A}" in text
    assert f"B · {SECRET_MODEL_B}" in text
    for sha256 in [*judged.prompt.media_hashes, *judged.response_a.media_hashes]:
        assert f'src="{media_path(slug=judged.project.slug, sha256=sha256)}"' in html
    # Each vote as the annotator saw it, and in canonical terms.
    assert "alice Left is better A (3) A 4.2 s sharper lettering" in text
    assert "bob Left is better B (1) B — —" in text
    assert "Prior annotations (imported) 5 A" in text
    assert "bob: Broken content — image 2 is blank" in text
    assert "Consensus A" in text
    assert "Ensemble A (0.97 agreement)" in text
    # The judges' section: one judge, both orders, with reasoning.
    assert "gpt-judge A A reads the sign right B B is brighter" in text.replace("Reasoning ", "")


def test_likert_votes_show_the_on_screen_value(client_for, carol, alice, project):
    project.scale = "likert6"
    project.save(update_fields=["scale"])
    pair = PairFactory(project=project, status=PairStatus.ANNOTATING)
    # Canonical 5 (A better), shown with A on the left: the annotator pressed 2.
    VoteFactory(pair=pair, annotator=alice, value=5)
    text = text_of(client_for(carol).get(pair_url(pair)))
    assert "alice 2: Left better A (5) A" in text


def test_hostile_content_is_escaped(client_for, carol, alice, project):
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    pair = PairFactory(project=project, prompt=make_prompt(project, hostile), criterion=hostile)
    VoteFactory(pair=pair, annotator=alice, rationale=hostile)
    judge = JudgeFactory(name="j", kind="openai")
    run = FilterRunFactory(project=project, threshold=0.9)
    Verdict.objects.create(
        run=run, judge=judge, pair=pair, order="AB", outcome="ok", side="A", reasoning=hostile
    )
    html = client_for(carol).get(pair_url(pair)).content.decode()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    # The rationale and the reasoning as text; prompt and criterion go through safe Markdown.
    assert html.count("&lt;script&gt;alert(2)&lt;/script&gt;") == 2


def test_previous_and_next_follow_the_filter(client_for, carol, project):
    pairs = [
        PairFactory(project=project, external_id=f"n{n}", task="t2i" if n % 2 else "edit")
        for n in range(6)
    ]
    client = client_for(carol)
    # Task t2i sorted by pair id descending: n5, n3, n1.
    query = "task=t2i&sort=-external_id"
    html = client.get(pair_url(pairs[3], query)).content.decode()
    assert f'href="{pair_url(pairs[5], query)}" rel="prev"' in unescape(html)
    assert f'href="{pair_url(pairs[1], query)}" rel="next"' in unescape(html)
    first = unescape(client.get(pair_url(pairs[5], query)).content.decode())
    assert 'rel="prev"' not in first
    assert f'href="{pair_url(pairs[3], query)}" rel="next"' in first
    # Without a filter: import order over all six.
    html = unescape(client.get(pair_url(pairs[0])).content.decode())
    assert 'rel="prev"' not in html
    assert f'href="{pair_url(pairs[1])}" rel="next"' in html


def test_browser_rows_link_to_the_page_with_the_filter(client_for, carol, project):
    pair = PairFactory(project=project, external_id="linked", task="t2i")
    html = client_for(carol).get(reverse("pairs", args=[project.slug]) + "?task=t2i").content
    assert f'href="{pair_url(pair, "task=t2i")}"' in unescape(html.decode())


def test_a_pair_by_its_import_id(client_for, carol, dave, alice, project):
    pair = PairFactory(project=project, external_id="set/one 7")
    url = reverse("pair-by-external-id", args=[project.slug, "set/one 7"]) + "?task=text"
    response = client_for(dave).get(url)
    assert response.status_code == 302
    assert response["Location"] == pair_url(pair, "task=text")
    missing = reverse("pair-by-external-id", args=[project.slug, "nope"])
    assert client_for(carol).get(missing).status_code == 404
    assert client_for(alice).get(url).status_code == 403


def test_prior_ratings_of_each_response_show_on_the_pair_and_adjudication_pages(
    client_for, carol, project
):
    """MMRB2's reasoning ratings, per response with their counts; not listed as votes."""
    pair = PairFactory(project=project, status=PairStatus.DISPUTED, prior_label="A")
    rows = [("A", "B"), ("A", "B"), ("A", "C"), ("B", "C")]
    for position, (response, rating) in enumerate(rows):
        PriorAnnotation.objects.create(
            pair=pair, position=position, response=response, rating=rating
        )
    text = text_of(client_for(carol).get(pair_url(pair)))
    assert "Prior ratings of each response (imported)" in text
    assert "Response A: B × 2, C × 1 (B, B, C)" in text  # noqa: RUF001 - the page's times sign
    assert "Response B: C × 1 (C)" in text  # noqa: RUF001 - the page's times sign
    assert "Prior annotations (imported)" not in text  # ratings are not votes
    adjudication = text_of(client_for(carol).get(f"/p/{project.slug}/adjudication/{pair.pk}/"))
    assert "Response A: B × 2, C × 1 (B, B, C)" in adjudication  # noqa: RUF001 - the page's times sign
