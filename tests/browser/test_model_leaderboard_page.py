"""A researcher reads the model leaderboard on its own tab in Chromium: the models
ranked best first, the strength chart and the win-rate heatmap drawn, the source switch
working; an annotator gets 403. With ARBITER_SCREENSHOTS=1 the page is saved to
var/screenshots/model-leaderboard.png."""

from __future__ import annotations

import pytest

from annotation.models import PairStatus
from tests.browser.conftest import log_in, page_errors
from tests.factories import PairFactory, make_response

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (model of A, model of B, consensus label, reference label): strong beats middle beats weak.
PAIRS = [
    ("strong", "middle", "A", "B"),
    ("strong", "middle", "A", "B"),
    ("middle", "strong", "B", "A"),
    ("middle", "weak", "A", "B"),
    ("weak", "middle", "B", "A"),
    ("strong", "weak", "A", "B"),
    ("weak", "strong", "tie", "A"),
]


def test_a_researcher_reads_the_model_leaderboard(live_server, page, project, dave, screenshot):
    for n, (a, b, label, reference) in enumerate(PAIRS):
        PairFactory(
            project=project,
            external_id=f"m-{n}",
            task="t2i" if n % 2 else "text",
            response_a=make_response(project, a, f"{a} {n}"),
            response_b=make_response(project, b, f"{b} {n}"),
            status=PairStatus.CONSENSUS,
            consensus_label=label,
            prior_label=reference,
        )
    errors = page_errors(page)
    # The tab is in the project's header, beside Judges.
    log_in(page, live_server, "dave", f"/p/{project.slug}/")
    page.locator("nav.project-nav").get_by_role("link", name="Model leaderboard").click()
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/model-leaderboard/")
    section = page.locator("#models")
    rows = section.locator("table.lb-models tbody tr")
    assert [rows.nth(i).locator("td").nth(1).inner_text() for i in range(3)] == [
        "strong",
        "middle",
        "weak",
    ]
    for chart in ("model-strength", "model-win-rates"):
        svg = section.locator(f"svg[aria-labelledby='chart-{chart}-title']")
        assert svg.is_visible(), chart
        box = svg.bounding_box()
        assert box is not None, (chart, box)
        assert box["width"] > 300, (chart, box)
    screenshot(page, "model-leaderboard")

    # The reference labels say the opposite.
    section.get_by_role("link", name="Reference labels").click()
    page.wait_for_url("**source=reference**")
    rows = page.locator("#models table.lb-models tbody tr")
    assert rows.nth(0).locator("td").nth(1).inner_text() == "weak"
    assert errors == []


def test_an_annotator_cannot_open_it(live_server, page, project, alice):
    PairFactory(
        project=project,
        response_a=make_response(project, "strong", "s"),
        response_b=make_response(project, "weak", "w"),
        status=PairStatus.CONSENSUS,
        consensus_label="A",
    )
    url = f"/p/{project.slug}/model-leaderboard/"
    log_in(page, live_server, "alice", url)
    assert "strong" not in page.content()
    assert (
        page.locator("nav.project-nav").get_by_role("link", name="Model leaderboard").count() == 0
    )
    answer = page.request.get(f"{live_server.url}{url}")
    assert answer.status == 403
