"""The project header and the Overview in Chromium: a curator logs in through the real form,
sees the Overview's next steps and bars, and moves between Overview, Filter runs and Settings
with the same header, its current tab marked; researchers and annotators see only their tabs.
With ARBITER_SCREENSHOTS=1 each page is saved under var/screenshots/ for a reviewer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotation.models import PairStatus, Role
from tests.browser.conftest import log_in
from tests.factories import MembershipFactory, PairFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def screenshot(page, name: str) -> None:
    if os.environ.get("ARBITER_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def tabs(page) -> list[str]:
    return page.locator(".project-tabs a").all_inner_texts()


def current_tab(page) -> str:
    return page.locator('.project-tabs a[aria-current="page"]').inner_text()


@pytest.fixture
def stocked(project):
    """A project with work in every state the Overview speaks of."""
    PairFactory.create_batch(12, project=project, task="t2i")
    PairFactory.create_batch(5, project=project, task="edit", status=PairStatus.DISPUTED)
    PairFactory.create_batch(
        6, project=project, task="edit", status=PairStatus.ANNOTATING, vote_count=2
    )
    PairFactory.create_batch(
        8,
        project=project,
        task="text",
        status=PairStatus.CONSENSUS,
        vote_count=3,
        consensus_label="A",
    )
    PairFactory.create_batch(4, project=project, task="text", status=PairStatus.QUEUED)
    return project


def test_a_curator_moves_through_the_project_with_one_header(live_server, page, stocked, carol):
    slug = stocked.slug
    log_in(page, live_server, "carol", f"/p/{slug}/")
    assert current_tab(page) == "Overview"
    header = tabs(page)
    for expected in ("Overview", "Queue", "Import", "Filter runs", "Settings"):
        assert expected in header
    assert "Annotate" not in header
    next_steps = page.locator(".ov-steps").inner_text()
    assert "12 pairs imported: run the judges or enqueue." in next_steps
    assert "5 pairs disputed: adjudicate." in next_steps
    assert page.locator(".ov-tasks progress").count() == 2  # edit and text reached annotators
    assert "not with annotators yet" in page.locator(".ov-tasks").inner_text()  # t2i
    assert page.get_by_role("link", name="API docs").is_visible()
    screenshot(page, "overview-curator")

    page.get_by_role("link", name="run the judges").click()
    page.wait_for_url(f"{live_server.url}/judges/p/{slug}/filter-runs/")
    assert current_tab(page) == "Filter runs"
    assert tabs(page) == header
    assert "Nothing to judge" not in page.content()  # 12 pairs are waiting
    screenshot(page, "filter-runs-curator")

    page.locator(".project-tabs").get_by_role("link", name="Settings").click()
    page.wait_for_url(f"{live_server.url}/p/{slug}/settings/")
    assert current_tab(page) == "Settings"
    assert tabs(page) == header
    screenshot(page, "settings-curator")


def test_researchers_and_annotators_see_only_their_tabs(live_server, page, stocked):
    for username, role in (("dave", Role.RESEARCHER), ("alice", Role.ANNOTATOR)):
        MembershipFactory(project=stocked, user=UserFactory(username=username), role=role)
    log_in(page, live_server, "dave", f"/p/{stocked.slug}/")
    researcher = tabs(page)
    assert "Filter runs" in researcher
    assert not {"Import", "Settings", "Queue", "Annotate"} & set(researcher)
    assert "12 pairs imported." in page.locator(".ov-steps").inner_text()
    screenshot(page, "overview-researcher")

    page.context.clear_cookies()
    log_in(page, live_server, "alice", f"/p/{stocked.slug}/")
    assert tabs(page) == ["Overview", "Annotate", "My votes"]
    assert "10 pairs left for you" in page.locator(".ov-next").inner_text()
    assert not page.locator(".ov-tasks").count()
    screenshot(page, "overview-annotator")
