"""A curator adds a webhook in Chromium against a live server: the form refuses a bad URL on
its field, the secret shows once, Send test reaches a real receiver on loopback whose
signature verifies, and the delivery log shows the answer; Redeliver sends the same id."""

from __future__ import annotations

import pytest
from standardwebhooks.webhooks import Webhook

from annotation.models import WebhookEndpoint
from tests.annotation.webhooks.conftest import receiver  # noqa: F401 - a fixture
from tests.browser.conftest import log_in, page_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_curator_adds_tests_and_redelivers_a_webhook(
    live_server,
    page,
    screenshot,
    settings,
    project,
    carol,
    receiver,  # noqa: F811
):
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = True
    target = receiver()
    log_in(page, live_server, "carol", f"/p/{project.slug}/webhooks/")
    assert page.locator('.project-tabs a[aria-current="page"]').inner_text() == "Webhooks"

    page.fill("#id_url", "ftp://example.com/hook")
    page.get_by_label("Release built").check()
    page.get_by_role("button", name="Add webhook").click()
    assert "only http and https URLs are allowed" in page.locator("#id_url_error").inner_text()

    page.fill("#id_url", target.url)
    page.get_by_role("button", name="Add webhook").click()
    secret = page.locator("#webhook-secret").inner_text()
    endpoint = WebhookEndpoint.objects.get()
    assert secret == endpoint.secret
    assert endpoint.events == ["release.built"]
    screenshot(page, "webhooks")

    page.get_by_role("link", name=target.url).click()
    assert page.locator("#webhook-secret").count() == 0
    page.get_by_role("button", name="Send test").click()
    page.get_by_text("HTTP 200").wait_for()
    (request,) = target.requests
    assert Webhook(secret).verify(request.body, request.headers)["type"] == "webhook.test"

    page.get_by_role("button", name="Redeliver").click()
    page.get_by_text("Delivery queued again").wait_for()
    assert len(target.requests) == 2
    assert target.requests[1].headers["webhook-id"] == request.headers["webhook-id"]
    screenshot(page, "webhook")
    assert page_errors(page) == []
