"""A flag's round trip in Chromium: an annotator flags the pair on screen with the keyboard and
still votes on it; a curator replies and resolves on the pair page; the annotator reads the
reply in My flags."""

from __future__ import annotations

import pytest

from annotation.models import Flag, Vote
from tests.annotation.queue.conftest import secret_pair
from tests.browser.conftest import log_in, page_errors, wait_for_keys

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_flag_reply_and_the_annotator_reads_it(
    live_server, browser, page, project, alice, carol, screenshot
):
    secret_pair(project, 0)
    secret_pair(project, 1)
    errors = page_errors(page)
    annotate = f"/p/{project.slug}/annotate/"
    log_in(page, live_server, "alice", annotate)
    page.wait_for_load_state("load")
    wait_for_keys(page)
    page.keyboard.press("f")
    page.keyboard.press("ArrowDown")  # from Broken media to Ambiguous prompt
    screenshot(page, "flag-form")
    page.keyboard.press("Enter")
    page.wait_for_selector(".wb-notice:has-text('Flagged: Ambiguous prompt')")
    wait_for_keys(page)
    page.keyboard.press("1")  # the flagged pair is still there to vote on
    page.wait_for_selector(".wb-notice:has-text('Saved')")
    flag = Flag.objects.get()
    assert flag.kind == "ambiguous_prompt"
    assert Vote.objects.get().pair_id == flag.pair_id

    curator = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    pair_page = f"/p/{project.slug}/pairs/{flag.pair_id}/"
    log_in(curator, live_server, "carol", pair_page)
    curator.fill(f"#reply-{flag.pk}", "The lighthouse on the left of the prompt.")
    curator.click("text=Reply and resolve")
    curator.wait_for_selector("#flags .badge:has-text('resolved')")
    screenshot(curator, "flag-replied")
    curator.context.close()

    page.click("[data-my-flags]")
    page.wait_for_selector(".flag-replies:has-text('The lighthouse on the left of the prompt.')")
    assert "resolved" in page.inner_text(".flag-item")
    screenshot(page, "my-flags")
    assert errors == []
