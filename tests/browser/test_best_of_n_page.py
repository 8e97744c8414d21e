"""A curator runs best-of-N from its page in Chromium against a live server: uploads a
candidates file, picks the built-in heuristic judge and the knockout, and reads the bracket;
the JSON download is the run's outcome. With ARBITER_SCREENSHOTS=1 the run's page is saved to
var/screenshots/best-of-n.png."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from judges.models import BestOfNRun
from tests.browser.conftest import log_in, page_errors
from tests.factories import JudgeFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_curator_runs_a_knockout_and_reads_the_bracket(
    live_server, page, project, carol, tmp_path, screenshot
):
    JudgeFactory(name="heuristic")
    candidates = tmp_path / "candidates.jsonl"
    line = {
        "id": "sea-poem",
        "prompt": "Write a poem about the sea",
        "candidates": [
            {"id": "refuses", "content": "I'm sorry, but I can't help with that."},
            {"id": "writes", "content": "Waves fold over the grey stones, gulls above."},
            {"id": "refuses-too", "content": "I am unable to help with that request."},
        ],
    }
    candidates.write_text(json.dumps(line) + "\n", encoding="utf-8")
    errors = page_errors(page)
    log_in(page, live_server, "carol", reverse("judges:best-of-n", args=[project.slug]))
    assert page.locator("nav.project-nav a[aria-current=page]").inner_text() == "Best-of-N"
    page.set_input_files("input[name=candidates]", str(candidates))
    page.select_option("select[name=judge]", "heuristic")
    page.select_option("select[name=method]", "knockout")
    page.click("button:has-text('Run')")
    page.wait_for_selector(".best-of-n-result")
    saved = BestOfNRun.objects.get()
    assert (
        page.url
        == f"{live_server.url}{reverse('judges:best-of-n-run', args=[project.slug, saved.pk])}"
    )
    assert page.inner_text(".best-of-n-result .best") == "writes"
    rounds = page.locator(".bracket-round")
    assert rounds.count() == 2
    assert rounds.nth(0).is_visible()
    assert "refuses vs writes" in rounds.nth(0).inner_text()
    screenshot(page, "best-of-n")
    with page.expect_download() as download_info:
        page.click("a:has-text('JSON')")
    downloaded = json.loads(download_info.value.path().read_text(encoding="utf-8"))
    assert downloaded == saved.outcome
    assert downloaded["results"][0]["best"] == "writes"
    assert errors == []
