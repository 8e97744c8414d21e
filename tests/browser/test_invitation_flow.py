"""An invitation in Chromium: a curator invites an address on Settings, the message arrives at
a real SMTP server (tests/smtp_server.py), the invited person opens its link in a fresh
browser, chooses a password and lands signed in on the project; the link opened again says it
was used. The password reset is reached from the login page."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import log_in, page_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_invitation_is_accepted_in_the_browser(
    browser, page, live_server, settings, smtp_server, carol, project, screenshot
):
    smtp_server.use(settings)
    settings.ARBITER_BASE_URL = live_server.url
    settings_url = f"/p/{project.slug}/settings/"
    log_in(page, live_server, "carol", settings_url)
    page.fill("#id_email", "newcomer@example.org")
    page.select_option("form[action$='/invitations/'] select[name=role]", "researcher")
    page.click("text=Send invitation")
    page.wait_for_selector("text=Invitation sent to newcomer@example.org.")
    assert page.locator(".s-invitations").inner_text().count("newcomer@example.org") == 1
    screenshot(page, "invitation-sent")

    body = smtp_server.wait_for("newcomer@example.org").get_content()
    (link,) = re.findall(re.escape(live_server.url) + r"/invitations/\S+", body)
    invited = browser.new_context().new_page()
    errors = page_errors(invited)
    invited.goto(link)
    assert "Join Demo project" in invited.inner_text("h1")
    invited.fill("#id_new_password1", "a fresh and long passphrase")
    invited.fill("#id_new_password2", "a fresh and long passphrase")
    invited.click("text=Accept and sign in")
    invited.wait_for_url(f"{live_server.url}/p/{project.slug}/")
    assert "Welcome to Demo project." in invited.inner_text("body")
    screenshot(invited, "invitation-accepted")
    assert errors == []

    again = browser.new_context().new_page()
    again.goto(link)
    assert again.inner_text("h1") == "Invitation already used"
    again.click("text=Sign in")
    again.click("text=Forgotten your password?")
    assert again.inner_text("h1") == "Reset your password"
