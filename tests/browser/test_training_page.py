"""A researcher trains a reward model from the Reward models page in Chromium against a live
server (Celery eager: the training runs when the form is sent) and reads its curves: each
chart's SVG is visible with a drawn line, and the per-epoch table opens. With
ARBITER_SCREENSHOTS=1 the page is also saved to var/screenshots/training.png."""

from __future__ import annotations

import pytest
from django.urls import reverse

from judges.models import TrainingRun
from tests.browser.conftest import log_in
from tests.judges.training_support import consensus_pairs_in, preference_pairs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_trains_and_reads_the_curves(
    live_server, page, project, dave, settings, tmp_path, screenshot
):
    settings.ARBITER_CHECKPOINT_ROOT = tmp_path / "checkpoints"
    consensus_pairs_in(project, preference_pairs(80, seed=3))
    errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and not message.location["url"].endswith("/favicon.ico")
            else None
        ),
    )
    log_in(page, live_server, "dave", reverse("judges:training", args=[project.slug]))
    page.fill("input[name=epochs]", "4")
    page.fill("input[name=lr]", "0.01")
    page.fill("input[name=batch_size]", "16")
    page.fill("input[name=register]", "browser-rm")
    page.click("button:has-text('Start training')")
    page.wait_for_selector("#training-progress .training-outcome", timeout=60_000)

    run = TrainingRun.objects.get()
    assert run.status == "succeeded"
    assert run.judge is not None
    assert "browser-rm" in page.inner_text("#training-progress")
    charts = page.locator("#training-progress svg.chart")
    assert charts.count() == 3
    for index in range(3):
        svg = charts.nth(index)
        box = svg.bounding_box()
        assert box is not None
        assert box["width"] > 300
        assert box["height"] > 100
        assert svg.locator("polyline").count() == 1
    page.click("summary:has-text('Metrics per epoch')")
    rows = page.locator(".training-epochs tbody tr")
    assert rows.count() == len(run.history)
    screenshot(page, "training")
    assert errors == []
