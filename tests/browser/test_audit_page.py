"""A curator changes a setting and reads it in the Audit log tab in Chromium against a live
server: the event shows who and what changed, the filter narrows the list, and the CSV link
downloads the filtered rows."""

from __future__ import annotations

import csv
import io

import pytest

from tests.browser.conftest import log_in, page_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_curator_filters_the_audit_log_and_downloads_it(
    live_server, page, screenshot, project, carol
):
    log_in(page, live_server, "carol", f"/p/{project.slug}/queue/")
    errors = page_errors(page)
    page.get_by_role("button", name="Pause the project").click()
    page.locator(".msg-success").wait_for()

    page.locator(".project-tabs").get_by_role("link", name="Audit log").click()
    row = page.locator("table.audit-events tbody tr").first
    assert row.get_attribute("data-action") == "project.paused"
    assert "carol" in row.inner_text()
    assert "paused: false → true" in row.inner_text()

    page.select_option("#id_action", "member.added")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("No events match.").wait_for()
    page.select_option("#id_action", "project.paused")
    page.get_by_role("button", name="Filter").click()
    assert page.locator("table.audit-events tbody tr").count() == 1
    screenshot(page, "audit")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download these 1 events as CSV").click()
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert [(r["action"], r["actor"], r["after"]) for r in rows] == [
        ("project.paused", "carol", '{"paused": true}')
    ]
    assert errors == []
