"""A researcher makes a release in Chromium against a live server: fills the new release form,
watches the build's progress turn into the dataset card and the file list (htmx polling, no
reload), publishes with the confirmation, and downloads the archive, whose bytes hash to the
sha256 the page shows and the release recorded. With ARBITER_SCREENSHOTS=1 the pages are
saved under var/screenshots/."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from annotation.models import Release
from annotation.tasks import release_build_run
from tests.annotation.releases.conftest import releasable_project
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def queue(monkeypatch):
    """The task queue: what the page sends is kept here, for the test to run as a worker."""
    sent: list[tuple] = []
    monkeypatch.setattr(
        "annotation.core.jobs.task_publish",
        lambda task, **options: sent.append((task, options["args"])),
    )
    return sent


def test_a_researcher_builds_publishes_and_downloads_a_release(
    live_server, page, screenshot, queue, project, alice, bob, carol, dave
):
    releasable_project(project, alice, bob, carol)
    log_in(page, live_server, "dave", f"/p/{project.slug}/releases/")
    assert page.locator('.project-tabs a[aria-current="page"]').inner_text() == "Releases"
    assert "No releases yet" in page.content()

    page.get_by_role("link", name="New release").click()
    assert page.locator("#id_version").input_value() == "1.0.0"
    page.get_by_label("Ties").check()
    page.fill("#id_splits", "train=0.5,test=0.5")
    page.fill("#id_seed", "11")
    page.get_by_role("button", name="Build the release").click()

    page.wait_for_url(f"{live_server.url}/p/{project.slug}/releases/1.0.0/")
    status = page.locator("[data-release-status]")
    assert status.get_attribute("data-release-status") == "queued"
    assert "Waiting for a worker" in page.locator("#release-build").inner_text()
    assert "Release 1.0.0 is being built." in page.locator("#messages").inner_text()
    screenshot(page, "release-queued")

    [(task, args)] = queue
    assert task == release_build_run  # the registered task (the module holds its proxy)
    task(*args)  # the worker's turn; the page polls and shows the outcome

    page.wait_for_selector('[data-release-status="built"]', timeout=10_000)
    assert "being built" not in page.locator("#messages").inner_text()
    release = Release.objects.get(project=project, version="1.0.0")
    build = page.locator("#release-build")
    assert release.manifest_sha256 in build.inner_text()
    assert page.locator(".rel-card-body h1").inner_text() == project.name
    files = page.locator(".rel-files tbody tr td:first-child").all_inner_texts()
    assert "manifest.json" in files
    assert "README.md" in files
    assert any(name.startswith("data/") and name.endswith(".parquet") for name in files)
    assert page.locator(".rel-files a").count() == 0  # no downloads before publishing
    screenshot(page, "release-built")

    page.get_by_role("button", name="Publish 1.0.0").click()
    assert page.locator('[data-release-status="built"]').is_visible()  # not confirmed yet
    page.get_by_label("I understand that a published release never changes").check()
    page.get_by_role("button", name="Publish 1.0.0").click()
    page.wait_for_selector('[data-release-status="published"]')
    assert "Release 1.0.0 is published." in page.locator("#messages").inner_text()
    screenshot(page, "release-published")

    shown = page.locator("[data-archive-sha256]").inner_text()
    with page.expect_download() as download_info:
        page.get_by_role("link", name="demo-1.0.0.tar.gz").click()
    download = download_info.value
    assert download.suggested_filename == "demo-1.0.0.tar.gz"
    data = Path(download.path()).read_bytes()
    release.refresh_from_db()
    assert hashlib.sha256(data).hexdigest() == shown == release.archive_sha256
    assert len(data) == release.archive_size
