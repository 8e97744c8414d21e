"""The pair lifecycle's transitions (annotation/decisions/lifecycle.py): each moves pairs only from
the states it allows, so a move made meanwhile by someone else stands; and the dependency rule
that keeps annotation free of judges (docs/architecture.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.decisions.lifecycle import (
    _DECISION_FIELDS,
    Decision,
    EnsembleOutcome,
    _decision_changes,
    pair_record_decision,
    pairs_apply_ensemble,
    pairs_enqueue,
    pairs_return_to_imported,
    pairs_start_judging,
)
from annotation.models import Pair, PairStatus
from tests.factories import PairFactory

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # import-linter, a dev dependency


def statuses(*pairs: Pair) -> list[str]:
    return [Pair.objects.get(pk=pair.pk).status for pair in pairs]


@pytest.mark.django_db
def test_start_judging_takes_only_imported_pairs_of_the_project(project, other_project):
    imported, chosen, queued = (
        PairFactory(project=project),
        PairFactory(project=project),
        PairFactory(project=project, status=PairStatus.QUEUED),
    )
    theirs = PairFactory(project=other_project)
    ids = pairs_start_judging(project=project, pair_ids=[chosen.pk, queued.pk, theirs.pk])
    assert ids == [chosen.pk]
    assert statuses(imported, chosen, queued, theirs) == [
        PairStatus.IMPORTED,
        PairStatus.JUDGING,
        PairStatus.QUEUED,
        PairStatus.IMPORTED,
    ]
    assert pairs_start_judging(project=project) == [imported.pk]
    assert pairs_start_judging(project=project) == []


def test_start_judging_leaves_gold_pairs_to_the_annotators(project):
    gold = PairFactory(project=project, is_gold=True, gold_label="A")
    ordinary = PairFactory(project=project)
    assert pairs_start_judging(project=project) == [ordinary.pk]
    assert statuses(gold) == [PairStatus.IMPORTED]


@pytest.mark.django_db
def test_return_to_imported_moves_only_judging_pairs(project):
    judging = PairFactory(project=project, status=PairStatus.JUDGING)
    moved = PairFactory(project=project, status=PairStatus.QUEUED)  # a curator's move stands
    assert pairs_return_to_imported(pair_ids=[judging.pk, moved.pk]) == 1
    assert statuses(judging, moved) == [PairStatus.IMPORTED, PairStatus.QUEUED]


@pytest.mark.django_db
def test_apply_ensemble_writes_outcomes_onto_pairs_still_judging(project):
    easy, contested, over_budget, moved = PairFactory.create_batch(
        4, project=project, status=PairStatus.JUDGING
    )
    Pair.objects.filter(pk=moved.pk).update(status=PairStatus.QUEUED)
    summary = {"run": 7, "votes": {"A": 6, "B": 0, "tie": 0}}
    counts = pairs_apply_ensemble(
        outcomes=[
            EnsembleOutcome(easy.pk, PairStatus.EASY, "A", 1.0, summary),
            EnsembleOutcome(contested.pk, PairStatus.QUEUED, "B", 4 / 6),
            EnsembleOutcome(over_budget.pk, PairStatus.IMPORTED, "tie", 0.5),
            EnsembleOutcome(moved.pk, PairStatus.EASY, "A", 1.0),
        ]
    )
    assert counts == {PairStatus.EASY: 1, PairStatus.QUEUED: 1, PairStatus.IMPORTED: 1}
    easy.refresh_from_db()
    assert (easy.status, easy.ensemble_label, easy.ensemble_agreement) == ("easy", "A", 1.0)
    assert easy.ensemble_summary == summary
    assert statuses(contested, over_budget) == [PairStatus.QUEUED, PairStatus.IMPORTED]
    moved.refresh_from_db()
    assert (moved.status, moved.ensemble_label, moved.ensemble_agreement) == ("queued", "", None)


@pytest.mark.django_db
def test_apply_ensemble_refuses_statuses_that_are_not_its_own(project):
    pair = PairFactory(project=project, status=PairStatus.JUDGING)
    with pytest.raises(ValueError, match="status: the ensemble cannot send a pair to consensus"):
        pairs_apply_ensemble(outcomes=[EnsembleOutcome(pair.pk, PairStatus.CONSENSUS, "A", 1.0)])
    assert statuses(pair) == [PairStatus.JUDGING]


@pytest.mark.django_db
def test_enqueue_moves_only_imported_pairs(project):
    imported = PairFactory(project=project)
    judging = PairFactory(project=project, status=PairStatus.JUDGING)
    easy = PairFactory(project=project, status=PairStatus.EASY)
    assert pairs_enqueue(project=project) == 1
    assert statuses(imported, judging, easy) == [
        PairStatus.QUEUED,
        PairStatus.JUDGING,
        PairStatus.EASY,
    ]


@pytest.mark.django_db
def test_the_queue_page_enqueues_through_the_service_and_spares_judging_pairs(
    project, carol, client_for
):
    imported = PairFactory(project=project)
    judging = PairFactory(project=project, status=PairStatus.JUDGING)
    response = client_for(carol).post(
        reverse("curator-queue-action", args=[project.slug, "enqueue"]),
        {"enqueue-pair_ids": f"{imported.external_id} {judging.external_id}"},
        follow=True,
    )
    assert "Sent 1 imported pair to the annotators" in response.content.decode()
    assert statuses(imported, judging) == [PairStatus.QUEUED, PairStatus.JUDGING]


def test_annotation_never_imports_judges():
    result = subprocess.run([str(LINT_IMPORTS)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "annotation never imports judges KEPT" in result.stdout


def _decision_columns(pair_id: int) -> dict:
    return Pair.objects.filter(pk=pair_id).values(*_DECISION_FIELDS, "vote_count").get()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "decision",
    [
        Decision(PairStatus.CONSENSUS, "A", "", 3, 0),
        Decision(PairStatus.ANNOTATING, "", "split 1-1-1", 4, 1),
        Decision(PairStatus.DISPUTED, "", "tie against A", 3, 1),
    ],
)
def test_record_decision_writes_what_the_orm_update_wrote(project, decision):
    """pair_record_decision's prepared statement against the ORM update it stands for."""
    now = timezone.now()
    by_statement, by_orm = (
        PairFactory(project=project, status=PairStatus.ANNOTATING, vote_count=3, target_votes=3)
        for _ in range(2)
    )
    assert pair_record_decision(pair_id=by_statement.pk, decision=decision, now=now)
    Pair.objects.filter(pk=by_orm.pk).update(**_decision_changes(decision, now))
    assert _decision_columns(by_statement.pk) == _decision_columns(by_orm.pk)
    assert _decision_columns(by_statement.pk)["decided_at"] == now


@pytest.mark.django_db
@pytest.mark.parametrize(
    "state",
    [
        {"status": PairStatus.CONSENSUS, "vote_count": 3, "consensus_label": "A"},  # decided
        {"status": PairStatus.DISPUTED, "vote_count": 3},
        {"status": PairStatus.ANNOTATING, "vote_count": 2},  # not at its target
    ],
)
def test_record_decision_leaves_pairs_not_open_at_their_target(project, state):
    pair = PairFactory(project=project, target_votes=3, **state)
    before = _decision_columns(pair.pk)
    decision = Decision(PairStatus.CONSENSUS, "B", "", 3, 0)
    assert not pair_record_decision(pair_id=pair.pk, decision=decision, now=timezone.now())
    assert _decision_columns(pair.pk) == before
