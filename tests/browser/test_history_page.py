"""An annotator votes on the comparison page in Chromium, opens My votes from the header and
finds her vote there as she gave it (the side as it was on her screen, her reason), her speed,
and on a decided pair, with the curators' setting on, whether it matched the consensus."""

from __future__ import annotations

import pytest

from annotation.models import PairStatus, Project, Side
from tests.annotation.queue.conftest import SECRET_MODEL_A, SECRET_MODEL_B, secret_pair
from tests.browser.conftest import log_in, page_errors, wait_for_keys
from tests.factories import PairFactory, VoteFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_my_votes_from_the_comparison_page(live_server, page, project, alice, screenshot):
    Project.objects.filter(pk=project.pk).update(history_shows_consensus=True)
    decided = PairFactory(project=project, status=PairStatus.CONSENSUS, consensus_label=Side.B)
    VoteFactory(pair=decided, annotator=alice, side=Side.A, rationale="an earlier vote")
    secret_pair(project)
    errors = page_errors(page)
    log_in(page, live_server, "alice", f"/p/{project.slug}/annotate/")
    page.wait_for_load_state("load")
    wait_for_keys(page)
    page.keyboard.press("3")  # ternary: 3 is right
    page.wait_for_selector("text=Saved: right is better")

    page.get_by_role("link", name="My votes").click()
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/history/")
    rows = page.locator("tr[data-vote]")
    assert rows.count() == 2
    newest = rows.nth(0).inner_text()
    assert "Draw a lighthouse at dusk, variant 0" in newest
    assert "Right is better" in newest
    assert "Matched" not in newest
    assert "Differed" not in newest  # still collecting votes: says nothing of others
    assert "Differed from the consensus" in rows.nth(1).inner_text()
    assert page.locator('[data-speed="votes"]').inner_text() == "2"
    assert page.locator('[data-speed="median"]').inner_text() != "n/a"
    body = page.content()
    assert SECRET_MODEL_A not in body
    assert SECRET_MODEL_B not in body

    page.fill("#id_since", "2026-05-02")
    page.fill("#id_until", "2026-05-01")
    page.get_by_role("button", name="Show").click()
    page.wait_for_selector("text=until: must be on or after the day in since")
    screenshot(page, "vote-history")
    # The refused filter's 400 (and the console's word for it), nothing else.
    assert [e for e in errors if "status of 400" not in e] == [page.url]
