"""The API docs (Swagger UI at /api/v1/docs/) in Chromium under the site's CSP: the page
renders the operations and the policy is never violated (no inline style or script needed)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS = """() => {
    window.cspViolations = [];
    document.addEventListener("securitypolicyviolation", (event) => window.cspViolations.push(
        `${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`));
}"""


def test_the_api_docs_render_without_breaking_the_csp(live_server, page, carol, screenshot):
    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.add_init_script(f"({VIOLATIONS})()")
    log_in(page, live_server, "carol", "/")
    response = page.goto(f"{live_server.url}/api/v1/docs/")
    assert response.status == 200
    policy = response.headers["content-security-policy"]
    style_src = next(d for d in policy.split(";") if d.strip().startswith("style-src"))
    assert "unsafe-inline" not in style_src
    assert "unsafe-inline" not in policy
    page.wait_for_selector(".opblock-summary", timeout=15_000)
    # Open an operation, as a reader does: it renders more of the page's markup.
    page.locator(".opblock-summary").first.click()
    page.wait_for_selector(".opblock-body")
    page.wait_for_timeout(300)
    screenshot(page, "api-docs")
    assert page.evaluate("window.cspViolations") == []
    assert refused == []
