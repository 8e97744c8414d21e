"""A reward model's held-out accuracy says how many pairs it rests on, with its 95% Wilson
interval beside it and a warning below MIN_HELDOUT_PAIRS: on the training page and its list,
in the API and in ``train_reward_model``'s output. The interval is scipy's Wilson interval."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy.stats import binomtest

from judges.models import TrainingRun
from judges.reward_model.report import MIN_HELDOUT_PAIRS, heldout_report, wilson_interval
from tests.judges.training_support import consensus_pairs_in, preference_pairs


@pytest.mark.parametrize(("correct", "total"), [(1, 1), (8, 10), (0, 5), (24, 30), (950, 1000)])
def test_the_interval_is_wilsons(correct, total):
    expected = binomtest(correct, total).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(correct, total)
    assert low == pytest.approx(expected.low, abs=1e-12)
    assert high == pytest.approx(expected.high, abs=1e-12)


def test_one_right_pair_of_one_is_anywhere_from_a_fifth_to_all():
    report = heldout_report(accuracy=1.0, pairs=1)
    assert (report.correct, round(report.low, 4), report.high) == (1, 0.2065, 1.0)
    assert report.too_few
    assert f"fewer than {MIN_HELDOUT_PAIRS}" in report.warning
    enough = heldout_report(accuracy=0.8, pairs=MIN_HELDOUT_PAIRS)
    assert enough.correct == 24
    assert not enough.too_few
    assert enough.warning == ""
    assert heldout_report(accuracy=None, pairs=None) is None


@pytest.mark.django_db
def test_a_six_pair_training_shows_its_count_interval_and_warning_everywhere(
    project, dave, client_for, api_for, capsys, checkpoint_root
):
    consensus_pairs_in(project, preference_pairs(6, seed=2))
    out = str(checkpoint_root / "six")
    call_command("train_reward_model", "demo", "--out", out, "--epochs", "2", "--seed", "1")
    run = TrainingRun.objects.get()
    assert run.status == "succeeded"
    assert 0 < run.heldout_pairs < MIN_HELDOUT_PAIRS
    report = heldout_report(accuracy=run.heldout_accuracy, pairs=run.heldout_pairs)
    interval = f"{report.low:.3f}-{report.high:.3f}"
    noun = "pair" if run.heldout_pairs == 1 else "pairs"

    printed = capsys.readouterr().out
    assert f"on {run.heldout_pairs} {noun} (95% interval {interval})" in printed
    assert report.warning in printed

    body = api_for(dave).get(f"/api/v1/projects/demo/training-runs/{run.pk}/").json()
    assert body["heldout"] == {
        "pairs": run.heldout_pairs,
        "correct": report.correct,
        "accuracy": run.heldout_accuracy,
        "interval": [report.low, report.high],
        "confidence": 0.95,
        "method": "wilson",
        "min_pairs": MIN_HELDOUT_PAIRS,
        "too_few": True,
        "warning": report.warning,
    }

    client = client_for(dave)
    page = client.get(reverse("judges:training-run", args=["demo", run.pk])).content.decode()
    assert f"<strong data-heldout-pairs>{run.heldout_pairs}</strong> held-out {noun}" in page
    assert f"{report.low:.3f}–{report.high:.3f}" in page  # noqa: RUF001 - the page's en dash
    assert "data-heldout-warning" in page
    assert f"fewer than {MIN_HELDOUT_PAIRS}" in page
    listing = client.get(reverse("judges:training", args=["demo"])).content.decode()
    assert f"on {run.heldout_pairs} ({report.low:.2f}–{report.high:.2f})" in listing  # noqa: RUF001 - the page's en dash
    assert "too few" in listing


@pytest.mark.django_db
def test_a_run_without_a_result_has_no_heldout_report(project, dave, api_for):
    run = TrainingRun.objects.create(
        project=project, epochs=1, lr=0.01, batch_size=8, seed=0, patience=1, holdout=0.2
    )
    body = api_for(dave).get(f"/api/v1/projects/demo/training-runs/{run.pk}/").json()
    assert body["heldout"] is None
