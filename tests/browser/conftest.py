"""Chromium for browser tests: Debian's build at /usr/bin/chromium, driven by Playwright.

Playwright's sync API runs an event loop in the test thread, so Django's guard against ORM
calls from async code is lifted for these tests (the ORM calls here are plain sync code)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# With ARBITER_SCREENSHOTS=1 the browser tests save the pages they look at here, for review.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh browser context (no cookies) at a laptop's window size."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    pending: set = set()
    page.on("request", lambda request: _track(pending, request, add=True))
    page.on("requestfinished", lambda request: _track(pending, request, add=False))
    page.on("requestfailed", lambda request: _track(pending, request, add=False))
    yield page
    _disarm_leave_beacon(page)
    _wait_for_answers(page, pending)
    context.close()


# Requests that write: a vote posted by the page's own fetch (the prepared next pair is shown
# before its answer is in), htmx's, a page load's claim. One still running on the live server
# when the test ends would race the emptying of the test's database (a deadlock).
_WRITING = {"fetch", "xhr", "document"}


def _track(pending: set, request, *, add: bool) -> None:
    if request.resource_type in _WRITING:
        (pending.add if add else pending.discard)(request)


def _wait_for_answers(page, pending: set, timeout_s: float = 5.0) -> None:
    """Waits, a few seconds at most, until the page's writing requests are answered."""
    from playwright.sync_api import Error as PlaywrightError

    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(PlaywrightError):
        while pending and time.monotonic() < deadline:
            page.wait_for_timeout(25)


def _disarm_leave_beacon(page) -> None:
    """A comparison page holding a pair claimed ahead frees it by a beacon when left
    (docs/curators.md, "The next pair, prepared ahead"); closed at the end of a test, its
    request would race the emptying of the test's database (a deadlock). The tests that
    leave the page do it while they run."""
    from playwright.sync_api import Error as PlaywrightError

    # A page closed or gone already sends no beacon.
    with contextlib.suppress(PlaywrightError):
        page.evaluate("() => document.body && document.body.removeAttribute('data-leave-beacon')")


@pytest.fixture
def screenshot():
    """``screenshot(page, name)``: saves ``var/screenshots/<name>.png`` when
    ``ARBITER_SCREENSHOTS=1``; does nothing otherwise."""

    def take(page, name: str) -> None:
        if os.environ.get("ARBITER_SCREENSHOTS") == "1":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    return take


def wait_for_keys(page) -> None:
    """Waits until the comparison page takes keys again (it ignores them for 300 ms after a
    pair appears)."""
    page.wait_for_selector("[data-pair-card]:not(.wb-settling)")


def log_in(page, live_server, username: str, next_url: str) -> None:
    """Signs ``username`` in through the login form and waits for ``next_url`` to load."""
    from tests.conftest import PASSWORD

    page.goto(f"{live_server.url}/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}{next_url}")


def page_errors(page) -> list[str]:
    """A list that fills with the page's console errors and its failed responses (400 and
    up) from now on; the browser's own favicon request is no error of the page."""
    errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and not message.location["url"].endswith("/favicon.ico")
            else None
        ),
    )
    page.on(
        "response", lambda response: errors.append(response.url) if response.status >= 400 else None
    )
    return errors
