"""Judges against people in the agreement report: the judges app adds its section through
the report's registry (annotation never imports judges), comparing the verdicts of the
project's filter runs with the consensus people reached."""

from __future__ import annotations

import pytest

from annotation.agreement.report import agreement_report_build
from annotation.core.report_sections import register_report_section
from annotation.models import Pair, PairStatus
from judges.runs import services as runs
from tests.factories import PairFactory
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    first_shown,
    make_judges,
    use_scripted_judges,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("celery_eager")]


@pytest.fixture
def judged(project, monkeypatch, django_capture_on_commit_callbacks):
    """A finished filter run of two judges on five pairs, then people's consensus on three
    of them (A, A, B); one pair is disputed and one is a gold pair with a consensus."""
    use_scripted_judges(monkeypatch, {"always-a": canonical("A"), "first-shown": first_shown()})
    judges = make_judges("always-a", "first-shown")
    pairs = PairFactory.create_batch(5, project=project)
    with django_capture_on_commit_callbacks(execute=True):
        runs.filter_run_create(project=project, judges=judges)
    for pair, label in zip(pairs[:3], ("A", "A", "B"), strict=True):
        Pair.objects.filter(pk=pair.pk).update(status=PairStatus.CONSENSUS, consensus_label=label)
    Pair.objects.filter(pk=pairs[3].pk).update(status=PairStatus.DISPUTED)
    Pair.objects.filter(pk=pairs[4].pk).update(
        status=PairStatus.CONSENSUS, consensus_label="B", is_gold=True, gold_label="B"
    )
    return pairs


def test_each_judge_is_compared_with_the_consensus_people_reached(judged, project):
    per_judge = agreement_report_build(project=project)["per_judge"]
    assert per_judge == [
        # Always A: right on the two A pairs in both orders.
        {
            "judge": "always-a",
            "pairs": 3,
            "agreement": 2 / 3,
            "by_order": {"AB": 2 / 3, "BA": 2 / 3},
        },
        # First shown: A when A is shown first (AB), B when B is (BA).
        {
            "judge": "first-shown",
            "pairs": 3,
            "agreement": 0.5,
            "by_order": {"AB": 2 / 3, "BA": 1 / 3},
        },
    ]


def test_a_project_without_filter_runs_has_no_judges(project):
    assert agreement_report_build(project=project)["per_judge"] == []


def test_sections_cannot_take_the_reports_own_keys():
    with pytest.raises(ValueError, match=r"^name: 'votes' is one of the report's own keys"):
        register_report_section("votes", lambda *, project: None)
