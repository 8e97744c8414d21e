"""A researcher opens the Agreement page in Chromium against a live server: every chart is
drawn (its SVG visible, with a size), a chart's table opens, and a click on a flagged
annotator's bar lands on that annotator's votes. With ARBITER_SCREENSHOTS=1 the page is also
saved to var/screenshots/agreement.png."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.annotation.agreement.conftest import cached_report, voted_pairs
from tests.browser.conftest import log_in, page_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHARTS = ("history", "tasks", "annotators", "kappa", "values", "statuses", "judges")
SCREENSHOT = Path(__file__).resolve().parents[2] / "var" / "screenshots" / "agreement.png"


def test_a_researcher_reads_the_charts_and_opens_a_flagged_annotators_votes(
    live_server, page, project, alice, bob, dave
):
    voted_pairs(project, alice, bob)
    cached_report(project)
    errors = page_errors(page)

    log_in(page, live_server, "dave", f"/p/{project.slug}/agreement/")
    page.wait_for_selector("svg.chart")

    for chart in CHARTS:
        svg = page.locator(f"svg[aria-labelledby='chart-{chart}-title']")
        assert svg.is_visible(), chart
        box = svg.bounding_box()
        assert box is not None, (chart, box)
        assert box["width"] > 300, (chart, box)
        assert box["height"] > 50, (chart, box)
        # Drawn: more than its title and description.
        assert svg.locator("rect, polyline, path, polygon").count() > 0, chart
    assert errors == []  # nothing the CSP refused, no script error

    section = page.locator("#annotators")
    table = section.locator("details.ag-table table")
    assert not table.is_visible()
    section.locator("summary", has_text="Table").click()
    assert table.is_visible()
    assert "low agreement, too fast" in table.inner_text()

    if os.environ.get("ARBITER_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)

    flagged = section.locator("a.chart-link", has=page.locator("rect.chart-flagged")).first
    flagged.click()
    page.wait_for_url(f"**/p/{project.slug}/agreement/annotators/quick/?source=all")
    assert page.locator("h1").inner_text().startswith("Votes of quick")
    assert page.locator("[data-flags]").inner_text() == "Flagged: low agreement, too fast."
    assert page.locator("table.ag-votes tbody tr").count() == 24
