"""Releases built from the imported reference labels, and the prior ratings of each response
(MMRB2's reasoning file) written in the data files and the MMRB2 file (docs/releases.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotation.imports.importer import pairs_import
from annotation.models import Pair, PriorAnnotation
from annotation.releases.selection import check_selection
from annotation.releases.selectors import release_rows
from tests.annotation.releases.conftest import built_release
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

MMRB2 = Path(__file__).resolve().parents[3] / "fixtures" / "mmrb2_sample"


@pytest.fixture
def reasoning(db):
    project = ProjectFactory(slug="mmrb2", scale="likert6", overlap=3)
    pairs_import(project=project, source=MMRB2 / "reasoning.json", media_root=MMRB2)
    return project


def test_a_release_from_reference_labels_holds_the_rated_pairs_with_their_ratings(
    reasoning, dave, other_project
):
    release = built_release(reasoning, dave, reference_labels=True)
    rows = {row["id"]: row for row in release_rows(release)}
    released = json.loads((MMRB2 / "reasoning.json").read_text())["pairs"]
    assert set(rows) == {pair["id"] for pair in released}  # imported, never voted on
    for pair in released:
        row = rows[pair["id"]]
        assert (row["label"], row["source"], row["votes"]) == ("A", "reference", [])
        assert json.loads(row["prior_ratings"]) == pair["human_annotations"]
    # The MMRB2 file writes the ratings as MMRB2's reasoning file does, and imports back.
    path = release.folder / "mmrb2" / "test.json"
    written = {pair["id"]: pair for pair in json.loads(path.read_text())["pairs"]}
    for pair in released:
        assert written[pair["id"]]["human_annotations"] == pair["human_annotations"]
        assert written[pair["id"]]["chosen"] == pair["chosen"]
    summary = pairs_import(project=other_project, source=path, media_root=release.folder)
    assert (summary.created_pairs, summary.prior_ratings) == (2, 8)
    again = PriorAnnotation.objects.filter(pair__project=other_project)
    assert sorted(again.values_list("response", "rating")) == sorted(
        PriorAnnotation.objects.filter(pair__project=reasoning).values_list("response", "rating")
    )


def test_reference_labels_leave_out_pairs_without_one_and_ties_unless_asked(reasoning, dave):
    Pair.objects.filter(project=reasoning, external_id__startswith="visulogic_001").update(
        prior_label="tie"
    )
    without = built_release(reasoning, dave, "1.0.0", reference_labels=True)
    assert len(list(release_rows(without))) == 1
    with_ties = built_release(reasoning, dave, "1.1.0", reference_labels=True, include_ties=True)
    assert sorted(row["label"] for row in release_rows(with_ties)) == ["A", "tie"]


def test_the_option_is_stored_only_when_chosen():
    assert "reference_labels" not in check_selection({}).as_json()
    assert check_selection({"reference_labels": True}).as_json()["reference_labels"] is True
    # The rule's sources may all be off when the reference labels are the source.
    chosen = {"reference_labels": True, "include_consensus": False, "include_adjudicated": False}
    assert check_selection(chosen).reference_labels
