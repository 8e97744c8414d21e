"""Releases (docs/releases.md): what a build writes, read back with pyarrow, pandas and
`datasets`; determinism; the MMRB2 file scored; splits by prompt."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from annotation.models import Pair, Release
from annotation.releases.archive import verify_release_path
from annotation.services.releases import release_rows
from tests.annotation.release_support import (
    ADJUDICATED_ID,
    CONSENSUS_VOTES,
    EASY_ID,
    IMAGE_ID,
    LEFT_OUT,
    TIE_ID,
    built_release,
    releasable_project,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def filled(project, alice, bob, carol):
    releasable_project(project, alice, bob, carol)
    return project


def _rows(release) -> dict[str, dict]:
    return {row["id"]: row for row in release_rows(release)}


def test_a_release_holds_the_decided_pairs_as_the_database_has_them(filled, dave):
    release = built_release(filled, dave)
    assert release.status == Release.Status.BUILT
    rows = _rows(release)
    assert set(rows) == {*CONSENSUS_VOTES, ADJUDICATED_ID, IMAGE_ID}
    for pair in Pair.objects.filter(external_id__in=rows).select_related(
        "response_a", "response_b"
    ):
        row = rows[pair.external_id]
        assert row["label"] == pair.consensus_label
        winner, loser = (
            (pair.response_b, pair.response_a)
            if pair.consensus_label == "B"
            else (pair.response_a, pair.response_b)
        )
        assert (row["chosen_model"], row["rejected_model"]) == (
            winner.model_name,
            loser.model_name,
        )
        assert row["task"] == pair.task and row["criterion"] == pair.criterion
    assert rows["rel-00"]["votes"] == [3, 3, 1]
    assert rows["rel-00"]["agreement"] == pytest.approx(2 / 3)
    assert rows["rel-00"]["source"] == "consensus"
    assert rows[ADJUDICATED_ID]["source"] == "adjudicated"
    assert release.pair_count == len(rows)
