"""The next video pair, claimed ahead and prepared in Chromium (docs/curators.md, "The next
pair, prepared ahead"): the answer key shows it at once, its two videos playing together
from bytes fetched before the key; the server serves the same lease; a refused vote brings
the pair back with the reason; leaving the page frees the pair claimed ahead."""

from __future__ import annotations

import pytest

from annotation.models import Assignment, Vote
from tests.browser.conftest import page_errors, wait_for_keys
from tests.browser.test_media_players import (
    FRAME,
    HARD_SYNC_SECONDS,
    PLAYING_SPREADS,
    _import_pairs,
    _open,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOWN = "() => document.querySelector('[data-pair-card]').dataset.assignment"
# The prepared card's media answered the page before the key (HEAD for the budget, then GET).
PREPARED = """() => window.performance.getEntriesByType("resource")
    .filter((entry) => entry.name.includes("/media/") && entry.initiatorType === "video").length"""


def _live(user) -> list[Assignment]:
    return list(Assignment.objects.filter(annotator=user, status="live").order_by("ahead", "pk"))


def _wait_prepared(page, media: int) -> None:
    """Until the prepared card's videos have their data (the next pair's players are built
    out of the document, so they are found through the page's resource timings)."""
    page.wait_for_function(f"() => ({PREPARED})() >= {media}")


def test_the_answer_shows_the_prepared_pair_playing_in_lock_step(
    page, live_server, project, alice, tmp_path
):
    _import_pairs(project, tmp_path, "video", count=3, seconds=4.0)
    errors = page_errors(page)
    _open(page, live_server, project)
    shown, ahead = _live(alice)
    assert page.evaluate(SHOWN) == str(shown.pk)
    _wait_prepared(page, 2)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.keyboard.press("1")
    # On screen before the server answers: the pair claimed ahead, playing.
    assert page.evaluate(SHOWN) == str(ahead.pk)
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll(".wb-response video"))
            .every((video) => !video.paused && video.currentTime > 0.2)"""
    )
    spreads = sorted(page.evaluate(PLAYING_SPREADS))
    assert spreads[len(spreads) // 2] <= FRAME, spreads
    assert spreads[-1] <= HARD_SYNC_SECONDS, spreads
    shown_urls = page.eval_on_selector_all(".wb-response video", "v => v.map(e => e.src)")
    assert not [url for url in requested if url in shown_urls], requested
    # The server served that same lease, and claimed the third pair ahead.
    page.wait_for_function(
        "() => document.querySelector('.wb-notice').textContent.includes('Saved')"
    )
    assert Vote.objects.get(annotator=alice).assignment_id == shown.pk
    current, after = _live(alice)
    assert current.pk == ahead.pk
    assert after.ahead
    assert "1</strong> done today" in page.inner_html(".wb-progress")
    # Once more: the third pair is shown from its prepared card in turn.
    _wait_prepared(page, 4)
    wait_for_keys(page)
    page.keyboard.press("1")
    assert page.evaluate(SHOWN) == str(after.pk)
    page.wait_for_function(
        "() => document.querySelector('.wb-progress').textContent.includes('2 done')"
    )
    assert Vote.objects.filter(annotator=alice).count() == 2
    assert errors == []


def test_a_vote_clicked_with_the_mouse_shows_the_prepared_pair_too(
    page, live_server, project, alice, tmp_path
):
    _import_pairs(project, tmp_path, "video", count=2, seconds=2.0)
    errors = page_errors(page)
    _open(page, live_server, project)
    shown, ahead = _live(alice)
    _wait_prepared(page, 2)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.click('[data-pair-card] [data-key="1"]')
    # Swapped in by the click's submit, before the server answers, from the prepared card.
    assert page.evaluate(SHOWN) == str(ahead.pk)
    page.wait_for_function(
        "() => document.querySelector('.wb-notice').textContent.includes('Saved')"
    )
    shown_urls = page.eval_on_selector_all(".wb-response video", "v => v.map(e => e.src)")
    assert not [url for url in requested if url in shown_urls], requested
    # One vote, through the lease that was on screen; the lease claimed ahead is now served.
    assert list(Vote.objects.filter(annotator=alice).values_list("assignment_id", flat=True)) == [
        shown.pk
    ]
    assert [(lease.pk, lease.ahead) for lease in _live(alice)] == [(ahead.pk, False)]
    assert errors == []


def test_a_refused_vote_brings_the_pair_back_with_the_reason(
    page, live_server, project, alice, tmp_path
):
    project.min_seconds_per_vote = 60
    project.save(update_fields=["min_seconds_per_vote"])
    _import_pairs(project, tmp_path, "video", count=2, seconds=2.0)
    _open(page, live_server, project)
    shown, ahead = _live(alice)
    _wait_prepared(page, 2)
    page.keyboard.press("1")
    page.wait_for_selector(".wb-notice.wb-error")
    assert "Too quick" in page.text_content(".wb-notice")
    assert page.evaluate(SHOWN) == str(shown.pk)
    assert not Vote.objects.exists()
    assert [lease.pk for lease in _live(alice)] == [shown.pk, ahead.pk]
    assert Assignment.objects.get(pk=ahead.pk).ahead


def test_leaving_the_page_frees_the_pair_claimed_ahead(page, live_server, project, alice, tmp_path):
    _import_pairs(project, tmp_path, "video", count=2, seconds=2.0)
    _open(page, live_server, project)
    shown, ahead = _live(alice)
    page.goto(f"{live_server.url}/")
    for _ in range(100):
        if Assignment.objects.get(pk=ahead.pk).status != "live":
            break
        page.wait_for_timeout(100)
    assert Assignment.objects.get(pk=ahead.pk).status == "released"
    assert Assignment.objects.get(pk=shown.pk).status == "live"
