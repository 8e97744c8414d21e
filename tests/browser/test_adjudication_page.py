"""The adjudication pages in Chromium: the curator gets there from the Queue page, the Decide
button's key hints are readable (not white on white), and the model names button is there once.
With ARBITER_SCREENSHOTS=1 the pair page is saved under var/screenshots/ for a reviewer."""

from __future__ import annotations

import pytest

from annotation.models import PairStatus, Vote
from tests.annotation.queue.conftest import annotator, secret_pair
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The text and background colours of an element, as the browser paints them.
_COLOURS = """el => {
    const style = getComputedStyle(el);
    return [style.color, style.backgroundColor];
}"""


def test_a_curator_reaches_a_dispute_from_the_queue_and_reads_its_keys(
    live_server, page, project, carol, screenshot
):
    pair = secret_pair(project, status=PairStatus.DISPUTED, dispute_reason="no_majority")
    for i, side in enumerate(["A", "B", "tie"]):
        Vote.objects.create(
            pair=pair, annotator=annotator(project, f"v{i}"), side=side, value=3 - i, left_is_a=True
        )
    queue_url = f"/p/{project.slug}/queue/"
    log_in(page, live_server, "carol", queue_url)
    page.get_by_role("link", name="Adjudication", exact=True).last.click()
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/adjudication/")
    page.get_by_role("link", name=pair.external_id).click()
    page.wait_for_selector("[data-decide-form]")
    screenshot(page, "adjudication-pair")

    assert page.get_by_role("button", name="Reveal model names").count() == 1
    hints = page.locator("[data-decide-form] button.primary kbd")
    assert hints.all_inner_texts() == ["Ctrl", "Enter"]
    for hint in hints.all():
        colour, background = hint.evaluate(_COLOURS)
        assert colour != background, (colour, background)


def test_the_keys_and_the_votes_count_from_the_left_where_a_is_shown(
    live_server, page, project, carol
):
    """One numbering, the screen's: A is the left response, key 1 picks A, and a vote for A
    reads 1 in the votes table whose header says 1 is A's end (canonically A is 3)."""
    pair = secret_pair(project, status=PairStatus.DISPUTED, dispute_reason="no_majority")
    for i, (side, value) in enumerate([("A", 3), ("tie", 2), ("B", 1)]):
        Vote.objects.create(
            pair=pair, annotator=annotator(project, f"v{i}"), side=side, value=value, left_is_a=True
        )
    url = f"/p/{project.slug}/adjudication/{pair.pk}/"
    log_in(page, live_server, "carol", url)
    page.wait_for_selector("[data-decide-form]")

    left, right = page.locator(".wb-responses .wb-response h2").all_text_contents()
    assert (left, right) == ("Response A", "Response B")
    header = page.locator("table.adj-votes thead th").nth(1).inner_text()
    assert "1 = A better" in header
    assert "3 = B better" in header
    values = page.locator("table.adj-votes tbody tr td:nth-child(2)").all_inner_texts()
    assert values == ["1 · A better", "2 · About the same", "3 · B better"]
    page.locator("h1").click()
    page.keyboard.press("1")
    assert page.locator("input[name=label][value=A]").is_checked()
    page.locator("h1").click()
    page.keyboard.press("3")
    assert page.locator("input[name=label][value=B]").is_checked()
