"""Consensus in the app (docs/agreement.md, "Consensus in the app"): the vote that fills a
pair's last slot decides it, disputes get extra annotators up to the cap and then wait for a
curator, undo never unpicks a decision, and re-applying the rule (command and button) changes
labels, never votes. The rules themselves are worked out by hand in test_agreement.py."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.decisions.services import pair_adjudicate
from annotation.imports.importer import pairs_import
from annotation.models import Adjudication, Pair, PairStatus, PriorAnnotation, Project, Vote
from tests.annotation.decisions.conftest import vote_via_api
from tests.annotation.queue.conftest import annotator
from tests.factories import PairFactory, ProjectFactory

MMRB2 = Path(__file__).resolve().parents[3] / "fixtures" / "mmrb2_sample"

pytestmark = pytest.mark.django_db


@pytest.fixture
def voters(project, api_for):
    """``voters(n)``: API clients of n fresh annotators of the project."""

    def make(n: int, prefix: str = "voter"):
        return [api_for(annotator(project, f"{prefix}{i}")) for i in range(n)]

    return make


def _vote_all(project, clients, sides) -> Pair:
    pair_ids = {
        vote_via_api(api, project, side).pair_id for api, side in zip(clients, sides, strict=True)
    }
    assert len(pair_ids) == 1
    return Pair.objects.get(pk=pair_ids.pop())


def test_the_vote_that_fills_the_last_slot_decides_the_pair(project, voters):
    PairFactory(project=project, status=PairStatus.QUEUED)
    clients = voters(3)
    pair = _vote_all(project, clients[:2], ["A", "B"])
    assert (pair.status, pair.consensus_label, pair.decided_at) == ("annotating", "", None)
    vote_via_api(clients[2], project, "A")
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label, pair.dispute_reason) == ("consensus", "A", "")
    assert pair.decided_at is not None
    assert (pair.vote_count, pair.target_votes) == (3, 3)


def test_dispute_extra_annotators_then_adjudication_end_to_end(project, voters, carol, client_for):
    Project.objects.filter(pk=project.pk).update(consensus_rule="unanimous", max_extra_votes=2)
    project.refresh_from_db()
    PairFactory(project=project, status=PairStatus.QUEUED)
    clients = voters(6)
    pair = _vote_all(project, clients[:3], ["A", "B", "A"])
    # Disputed under the cap: one more annotator, served again.
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("annotating", 4, 1)
    assert pair.dispute_reason == "not_unanimous"
    vote_via_api(clients[3], project, "A")
    pair.refresh_from_db()
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("annotating", 5, 2)
    vote_via_api(clients[4], project, "B")
    pair.refresh_from_db()
    # At the cap (overlap 3 + 2 extra): no more annotators, the curators decide.
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("disputed", 5, 2)
    assert clients[5].post(f"/api/v1/projects/{project.slug}/claim/").status_code == 204

    curator = client_for(carol)
    queue_page = curator.get(f"/p/{project.slug}/adjudication/")
    assert pair.external_id in queue_page.content.decode()
    decided = curator.post(
        f"/p/{project.slug}/adjudication/{pair.pk}/decide/",
        {"label": "B", "note": "A misses the second object"},
    )
    assert decided.status_code == 302
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label) == ("consensus", "B")
    adjudication = Adjudication.objects.get(pair=pair)
    assert (adjudication.curator, adjudication.label) == (carol, "B")
    assert adjudication.note == "A misses the second object"
    # The decision is not a vote.
    assert Vote.objects.filter(pair=pair).count() == 5
    assert not Vote.objects.filter(annotator=carol).exists()


def test_a_dispute_is_settled_by_the_extra_vote(project, voters):
    PairFactory(project=project, status=PairStatus.QUEUED)
    clients = voters(4)
    pair = _vote_all(project, clients[:3], ["A", "B", "tie"])
    assert (pair.status, pair.dispute_reason, pair.target_votes) == (
        "annotating",
        "no_majority",
        4,
    )
    vote_via_api(clients[3], project, "tie")
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label, pair.dispute_reason) == ("consensus", "tie", "")


def test_no_extra_annotators_when_the_cap_is_zero(project, voters):
    Project.objects.filter(pk=project.pk).update(max_extra_votes=0)
    project.refresh_from_db()
    PairFactory(project=project, status=PairStatus.QUEUED)
    pair = _vote_all(project, voters(3), ["A", "B", "tie"])
    assert (pair.status, pair.target_votes, pair.extra_slots) == ("disputed", 3, 0)


def test_undo_never_unpicks_a_decision(project, voters):
    # Priorities fix which pair comes first: within one priority each annotator has an order
    # of their own.
    PairFactory(project=project, status=PairStatus.QUEUED, priority=1)
    PairFactory(project=project, status=PairStatus.QUEUED)
    clients = voters(3)
    annotator(project, "spare")  # someone left to give a dispute its extra vote
    decided = _vote_all(project, clients, ["A", "A", "A"])
    assert decided.status == "consensus"
    refused = clients[2].post(f"/api/v1/projects/{project.slug}/undo/")
    assert refused.status_code == 409
    # A dispute raised the second pair's target: the vote that caused it stays too, or the
    # pair would wait for a fourth vote the dispute no longer asks for.
    disputed = _vote_all(project, clients, ["A", "B", "tie"])
    assert (disputed.status, disputed.target_votes) == ("annotating", 4)
    assert clients[2].post(f"/api/v1/projects/{project.slug}/undo/").status_code == 409
    disputed.refresh_from_db()
    assert (disputed.vote_count, disputed.lease_count, disputed.target_votes) == (3, 0, 4)
    assert Vote.objects.count() == 6


def test_prior_annotations_count_as_votes_of_external_raters(project, voters):
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    PriorAnnotation.objects.bulk_create(
        PriorAnnotation(pair=pair, position=n, value=3, label="A") for n in range(2)
    )
    vote_via_api(voters(1)[0], project, "B")
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label) == ("consensus", "A")


def test_votes_never_decide_a_gold_pair(project, voters):
    pair = PairFactory(
        project=project, status=PairStatus.QUEUED, target_votes=1, is_gold=True, gold_label="B"
    )
    vote_via_api(voters(1)[0], project, "A")
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label, pair.gold_label) == ("annotating", "", "B")
    call_command("apply_consensus", project.slug, stdout=StringIO())
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label) == ("annotating", "")


def _reapply(slug: str, *args: str) -> str:
    out = StringIO()
    call_command("apply_consensus", slug, *args, stdout=out)
    return out.getvalue()


def test_reapplying_a_changed_rule_changes_labels_never_votes(project, voters, carol):
    for priority in (3, 2, 1):  # served in this order to everyone
        PairFactory(project=project, status=PairStatus.QUEUED, priority=priority)
    clients = voters(3)
    annotator(project, "spare")  # someone left to give a dispute its extra vote
    split = _vote_all(project, clients, ["A", "A", "B"])
    unanimous = _vote_all(project, clients, ["B", "B", "B"])
    adjudicated = _vote_all(project, clients, ["A", "B", "tie"])
    Pair.objects.filter(pk=adjudicated.pk).update(status="disputed")  # as at the cap
    pair_adjudicate(pair=adjudicated, curator=carol, label="tie", note="both fine")
    votes_before = sorted(Vote.objects.values_list("pk", "pair_id", "side", "value", "is_extra"))
    Project.objects.filter(pk=project.pk).update(consensus_rule="unanimous")

    dry = _reapply(project.slug, "--dry-run")
    assert f"{split.external_id}: consensus A -> extra annotator 1 (not_unanimous)" in dry
    assert "would change 1;" in dry
    assert "1 adjudicated pairs keep their label" in dry
    split.refresh_from_db()
    assert (split.status, split.consensus_label) == ("consensus", "A")

    done = _reapply(project.slug)
    assert "changed 1;" in done
    split.refresh_from_db()
    assert (split.status, split.consensus_label, split.target_votes) == ("annotating", "", 4)
    unanimous.refresh_from_db()
    assert (unanimous.status, unanimous.consensus_label) == ("consensus", "B")
    adjudicated.refresh_from_db()
    assert (adjudicated.status, adjudicated.consensus_label) == ("consensus", "tie")
    after = sorted(Vote.objects.values_list("pk", "pair_id", "side", "value", "is_extra"))
    assert after == votes_before
    # Nothing left to change: a second run is a no-op.
    assert "changed 0;" in _reapply(project.slug)


def test_reapply_counts_a_late_extra_vote(project, voters):
    Project.objects.filter(pk=project.pk).update(min_agree=1, overlap=1)
    project.refresh_from_db()
    pair = PairFactory(project=project, status=PairStatus.QUEUED, target_votes=1)
    first, _second = voters(2)
    vote_via_api(first, project, "A")
    pair.refresh_from_db()
    assert (pair.status, pair.consensus_label) == ("consensus", "A")
    Vote.objects.create(
        pair=pair,
        annotator=annotator(project, "late"),
        side="B",
        value=1,
        left_is_a=True,
        is_extra=True,
    )
    Project.objects.filter(pk=project.pk).update(min_agree=2, max_extra_votes=0)
    assert f"{pair.external_id}: consensus A -> disputed (no_majority)" in _reapply(project.slug)


def test_apply_consensus_names_an_unknown_project(db):
    with pytest.raises(CommandError, match="slug: no project 'nope'"):
        call_command("apply_consensus", "nope")


def test_the_mmrb2_rule_needs_the_likert6_scale(db):
    with pytest.raises(CommandError, match="consensus_rule: The mmrb2 rule"):
        call_command(
            "create_project",
            "mixed",
            "--name",
            "Mixed",
            "--scale",
            "ternary",
            "--consensus",
            "mmrb2",
            stdout=StringIO(),
        )


def test_mmrb2_released_files_reanalysed_give_each_pair_its_chosen_label(db):
    project = ProjectFactory(slug="mmrb2", scale="likert6", overlap=3, consensus_rule="mmrb2")
    chosen = {}
    decided_at_import = 0
    for name in ("t2i", "edit", "interleaved", "reasoning"):
        summary = pairs_import(project=project, source=MMRB2 / f"{name}.json", media_root=MMRB2)
        decided_at_import += summary.decided_pairs
        for released in json.loads((MMRB2 / f"{name}.json").read_text())["pairs"]:
            if isinstance(released["human_annotations"], list):  # reasoning rates instead
                chosen[released["id"]] = released["chosen"]
    # Every voted pair has a clear majority within MMRB2's thresholds: none is disputed, and
    # the import decided each one already (docs/import-format.md, "Prior votes decide").
    decided = dict(
        Pair.objects.filter(project=project, status="consensus").values_list(
            "external_id", "consensus_label"
        )
    )
    assert decided == chosen
    assert len(decided) == decided_at_import == 5
    # Re-applying the same rule finds nothing to change; the reasoning pairs, rated but not
    # voted on, keep their reference label and wait for annotators.
    assert "changed 0;" in _reapply(project.slug)
    reasoning = Pair.objects.filter(project=project, external_id__startswith="visulogic")
    assert set(reasoning.values_list("status", "prior_label")) == {("imported", "A")}
    assert not Vote.objects.exists()


def test_the_reapply_button_is_for_curators(project, voters, carol, dave, alice, client_for):
    PairFactory(project=project, status=PairStatus.QUEUED)
    pair = _vote_all(project, voters(3), ["A", "A", "B"])
    Project.objects.filter(pk=project.pk).update(consensus_rule="unanimous", max_extra_votes=0)
    url = f"/p/{project.slug}/adjudication/reapply/"
    assert client_for(alice).post(url).status_code == 403
    assert client_for(dave).post(url).status_code == 403
    response = client_for(carol).post(url, follow=True)
    assert "Rule unanimous re-applied to 1 pairs: changed 1" in response.content.decode()
    pair.refresh_from_db()
    assert (pair.status, pair.dispute_reason) == ("disputed", "not_unanimous")
