"""A researcher opens the judge leaderboard in Chromium against a live server: the table ranks
the judges, the accuracy, position-bias and per-task charts are drawn, and the breakdowns
open. With ARBITER_SCREENSHOTS=1 the page is saved to var/screenshots/leaderboard.png."""

from __future__ import annotations

import json

import pytest

from judges.evaluation.judgement_import import judgements_import
from judges.evaluation.services import judge_evaluation_create
from tests.browser.conftest import log_in, page_errors
from tests.factories import JudgeFactory
from tests.judges.evaluation_support import labelled_pairs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def scored(project, name: str, answer) -> None:
    """A scores judge whose imported answers are ``answer(pair)`` in both orders, scored."""
    judge = JudgeFactory(name=name, kind="scores")
    pairs = project.pairs.order_by("pk")
    lines = [
        json.dumps({"pair": pair.external_id, "order": order, "verdict": answer(pair, order)})
        for pair in pairs
        for order in ("AB", "BA")
    ]
    judgements_import(judge=judge, project=project, lines=lines)
    judge_evaluation_create(judge=judge, project=project, call=False)


def test_a_researcher_reads_the_leaderboard(live_server, page, project, dave, screenshot):
    labelled_pairs(project, "ABAB", task="t2i")
    labelled_pairs(project, "AABB", task="edit")
    scored(project, "always-right", lambda pair, order: pair.consensus_label)
    scored(project, "first-shown", lambda pair, order: "A" if order == "AB" else "B")
    errors = page_errors(page)

    log_in(page, live_server, "dave", f"/judges/p/{project.slug}/leaderboard/")
    page.wait_for_selector("svg.chart")

    rows = page.locator("table.lb-table tbody tr")
    assert rows.count() == 2
    assert "always-right" in rows.nth(0).inner_text()
    assert "1.000" in rows.nth(0).inner_text()
    assert "first-shown" in rows.nth(1).inner_text()
    assert "0.500" in rows.nth(1).inner_text()
    charts = ["accuracy", "position"] + [
        f"tasks-{pk}" for pk in project.evaluations.values_list("pk", flat=True)
    ]
    for chart in charts:
        svg = page.locator(f"svg[aria-labelledby='chart-{chart}-title']")
        assert svg.is_visible(), chart
        box = svg.bounding_box()
        assert box is not None, (chart, box)
        assert box["width"] > 300, (chart, box)
        assert box["height"] > 50, (chart, box)
        assert svg.locator("rect").count() > 0, chart
    assert errors == []

    section = page.locator("#judge-first-shown")
    table = section.locator("details table")
    assert not table.is_visible()
    section.locator("summary").click()
    assert table.is_visible()
    assert "different models" in table.inner_text()
    screenshot(page, "leaderboard")
