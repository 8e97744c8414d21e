"""An annotator logs in through the real form and compares five pairs with the keyboard alone,
in Chromium against a live server; the five votes are then in the database, on the sides that
were pressed, and each next pair arrived without a page load, its images fetched ahead."""

from __future__ import annotations

import re

import pytest

from annotation.core.media_keys import media_url_key
from annotation.models import Assignment, Vote
from tests.annotation.queue.conftest import secret_pair
from tests.browser.conftest import wait_for_keys
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The keys pressed, in order, and the on-screen choice each one makes on the ternary scale.
KEYS = [("1", "left"), ("ArrowRight", "right"), ("2", "tie"), ("ArrowLeft", "left"), ("3", "right")]
VOTE_FORM = "[data-vote-form]"


def shown_assignment_id(page) -> int:
    action = page.get_attribute(VOTE_FORM, "action")
    return int(re.search(r"/annotate/(\d+)/vote/", action).group(1))


def requested(urls, requests: list[str]) -> bool:
    return all(any(seen.endswith(url) for seen in requests) for url in urls)


def wait_until(page, condition, timeout_ms: int = 5000) -> None:
    for _ in range(timeout_ms // 50):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError("timed out waiting for the browser")


def test_five_comparisons_with_the_keyboard_alone(live_server, page, project, alice, screenshot):
    pairs = [secret_pair(project, n, with_images=True) for n in range(6)]
    media_requests: list[str] = []
    page.on(
        "request",
        lambda request: media_requests.append(request.url) if "/media/" in request.url else None,
    )

    page.goto(f"{live_server.url}/login/?next=/p/{project.slug}/annotate/")
    page.keyboard.type("alice")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector(VOTE_FORM)
    page.wait_for_load_state("load")  # workbench.js is in
    page.evaluate("window.__sameDocument = true")  # gone if anything reloads the page

    pressed: dict[int, str] = {}
    for key, choice in KEYS:
        current = shown_assignment_id(page)
        pressed[current] = choice
        # A person looks at a pair for seconds; by then the next pair's images are in.
        upcoming = page.get_attribute("[data-pair-card]", "data-prefetch").split()
        wait_until(page, lambda urls=tuple(upcoming): requested(urls, media_requests))
        fetched_before = list(media_requests)
        wait_for_keys(page)
        page.keyboard.press(key)
        page.wait_for_function(
            """previous => {
                const form = document.querySelector("[data-vote-form]");
                return form && !form.action.endsWith(`/annotate/${previous}/vote/`);
            }""",
            arg=current,
        )
        # The images of the pair now on screen were fetched before the key was pressed.
        pair = Assignment.objects.get(pk=shown_assignment_id(page)).pair
        for content in (pair.prompt, pair.response_a, pair.response_b):
            for sha256 in content.media_hashes:
                key = media_url_key(sha256)  # media URLs name an opaque id
                assert any(url.endswith(key) for url in fetched_before), sha256
    screenshot(page, "comparison-t2i")
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator(".wb-progress").inner_text().startswith("5 done today")

    votes = Vote.objects.filter(annotator=alice).select_related("assignment")
    assert votes.count() == 5
    for vote in votes:
        choice = pressed[vote.assignment_id]
        if choice == "tie":
            assert vote.side == "tie"
        else:
            assert vote.side == ("A" if (choice == "left") == vote.left_is_a else "B")
        assert vote.time_on_task_ms is not None
        assert vote.time_on_task_ms > 0
    assert {vote.pair_id for vote in votes} < {pair.pk for pair in pairs}


def test_skip_undo_help_reason_and_viewer(live_server, page, project, alice):
    for n in range(3):
        secret_pair(project, n, with_images=True)
    page.goto(f"{live_server.url}/login/?next=/p/{project.slug}/annotate/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector(VOTE_FORM)
    page.wait_for_load_state("load")  # workbench.js is in

    page.keyboard.press("?")
    assert page.locator("#shortcuts-modal").is_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("g")
    assert page.locator("#guidelines-modal").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("dialog[open]").count()

    # An image opens the side-by-side viewer over the page; Escape closes it.
    page.locator(".wb-left [data-zoom]").first.click()
    assert page.locator("#viewer").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("dialog[open]").count()

    skipped = shown_assignment_id(page)
    wait_for_keys(page)
    page.keyboard.press("s")
    assert page.locator("[data-skip]").get_attribute("open") is not None
    page.keyboard.press("2")  # broken content
    page.wait_for_function(
        "previous => !document.querySelector('[data-vote-form]').action.includes(`/${previous}/`)",
        arg=skipped,
    )
    assert Assignment.objects.get(pk=skipped).pair.skips.get().reason == "broken"

    # A reason typed in the optional box travels with the vote; keys typed there are text.
    wait_for_keys(page)
    page.keyboard.press("r")  # opens the reason box, the cursor in it
    page.keyboard.type("sign 1 is sharper")
    page.keyboard.press("Escape")
    voted = shown_assignment_id(page)
    wait_for_keys(page)
    page.keyboard.press("1")
    page.wait_for_function(
        "previous => !document.querySelector('[data-vote-form]').action.includes(`/${previous}/`)",
        arg=voted,
    )
    assert Vote.objects.get(annotator=alice).rationale == "sign 1 is sharper"
    wait_for_keys(page)
    page.keyboard.press("u")
    page.wait_for_selector("text=Your last vote was undone")
    assert not Vote.objects.filter(annotator=alice).exists()
