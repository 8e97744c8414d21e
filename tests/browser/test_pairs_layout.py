"""The pairs browser in Chromium at 1440 x 900: a long pair id stays on one line, cut with an
ellipsis and whole in its cell's title; the bulk bar's Restrict list shows the annotators' names
uncut; the Prompt column offers no sort (it used to sort by import order under its name)."""

from __future__ import annotations

import pytest

from tests.annotation.queue.conftest import annotator
from tests.browser.conftest import log_in
from tests.factories import PairFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_ID = "mmrb2-text-to-image-000123-seed-42-variant-b-from-the-second-batch"
NAMES = ("annotator-with-a-long-name", "bob", "second-shift-annotator")


def test_pair_ids_stay_on_one_line_and_the_restrict_list_is_whole(
    live_server, browser, project, carol, screenshot
):
    for name in NAMES:
        annotator(project, name)
    PairFactory(project=project, external_id=LONG_ID, status="queued")
    PairFactory(project=project, external_id="short-1", status="queued")
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        log_in(page, live_server, "carol", f"/p/{project.slug}/pairs/")
        screenshot(page, "pairs-layout")
        headers = page.locator(".pairs-table thead th")
        assert headers.filter(has_text="Prompt").locator("a").count() == 0
        assert headers.filter(has_text="Task").locator("a").count() == 1
        ids = page.evaluate("""() => Array.from(document.querySelectorAll(".pairs-id a")).map(
            (link) => ({text: link.textContent, title: link.parentElement.title,
                        lines: link.getClientRects().length,
                        height: link.getBoundingClientRect().height,
                        lineHeight: parseFloat(getComputedStyle(link).lineHeight),
                        cut: link.scrollWidth > link.clientWidth}))""")
        by_text = {shown["text"]: shown for shown in ids}
        assert set(by_text) == {LONG_ID, "short-1"}
        for shown in ids:
            assert shown["lines"] == 1, shown
            assert shown["height"] < 1.5 * shown["lineHeight"], shown
            assert shown["title"] == shown["text"]
        assert by_text[LONG_ID]["cut"]
        assert not by_text["short-1"]["cut"]

        restrict = page.evaluate("""() => {
            const select = document.querySelector("#bulk-annotators");
            const box = select.getBoundingClientRect();
            const bar = select.closest(".pairs-bulk").getBoundingClientRect();
            return {top: box.top, bottom: box.bottom, barTop: bar.top, barBottom: bar.bottom,
                    options: select.options.length, size: select.size,
                    wide: select.scrollWidth <= select.clientWidth,
                    tall: select.scrollHeight <= select.clientHeight};
        }""")
        assert restrict["options"] == len(NAMES)
        # Inside its bar, every name at full width and every one in view without scrolling.
        assert restrict["barTop"] <= restrict["top"]
        assert restrict["bottom"] <= restrict["barBottom"]
        assert restrict["wide"], restrict
        assert restrict["tall"], restrict
    finally:
        context.close()
