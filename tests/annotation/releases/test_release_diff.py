"""The diff between two releases, on constructed rows (annotation/releases/diff.py)."""

from __future__ import annotations

import pytest

from annotation.releases.diff import (
    DiffRow,
    DuplicatePairId,
    Relabelled,
    release_diff,
)


def row(pair_id: str, label: str, task: str = "t2i", split: str = "test", **extra) -> dict:
    return {"id": pair_id, "label": label, "task": task, "split": split, **extra}


def test_identical_releases_differ_in_nothing():
    rows = [row("p1", "A"), row("p2", "B"), row("p3", "tie")]
    diff = release_diff(rows, list(reversed(rows)))
    assert diff.counts == {"added": 0, "removed": 0, "relabelled": 0, "unchanged": 3}


def test_added_removed_and_relabelled_are_told_apart():
    base = [row("p1", "A"), row("p2", "B"), row("p3", "tie"), row("p4", "A", task="edit")]
    new = [
        row("p1", "A"),  # unchanged
        row("p2", "A"),  # relabelled B -> A
        row("p3", "B", task="text"),  # relabelled tie -> B
        row("p5", "B", task="edit", split="train"),  # added
    ]  # p4 removed
    diff = release_diff(base, new)
    assert diff.added == [DiffRow("p5", "B", "edit", "train")]
    assert diff.removed == [DiffRow("p4", "A", "edit", "test")]
    assert diff.relabelled == [
        Relabelled("p2", "B", "A", "t2i"),
        Relabelled("p3", "tie", "B", "text"),
    ]
    assert diff.counts == {"added": 1, "removed": 1, "relabelled": 2, "unchanged": 1}


def test_a_split_change_alone_is_not_a_relabelling():
    diff = release_diff([row("p1", "A", split="train")], [row("p1", "A", split="test")])
    assert diff.counts["unchanged"] == 1


def test_every_list_is_in_id_order_whatever_the_input_order():
    base = [row(f"old-{n}", "A") for n in (3, 1, 2)]
    new = [row(f"new-{n}", "B") for n in (9, 7, 8)]
    diff = release_diff(base, new)
    assert [entry.id for entry in diff.added] == ["new-7", "new-8", "new-9"]
    assert [entry.id for entry in diff.removed] == ["old-1", "old-2", "old-3"]


def test_against_an_empty_release_everything_is_added_or_removed():
    rows = [row("p1", "A"), row("p2", "B")]
    assert release_diff([], rows).counts["added"] == 2
    assert release_diff(rows, []).counts["removed"] == 2


def test_ids_are_compared_as_text_and_only_the_small_fields_are_kept():
    base = [{"id": 7, "label": "A", "prompt": [{"type": "text", "text": "long"}]}]
    new = [{"id": "7", "label": "B"}]
    diff = release_diff(base, new)
    assert diff.relabelled == [Relabelled("7", "A", "B", "")]


def test_rows_are_read_once_and_lazily():
    def rows():
        yield row("p1", "A")
        yield row("p2", "B")

    diff = release_diff(rows(), rows())
    assert diff.counts["unchanged"] == 2


@pytest.mark.parametrize("side", ["base", "compared"])
def test_a_pair_twice_in_one_release_is_refused_naming_it(side):
    twice = [row("p1", "A"), row("p1", "B")]
    once = [row("p1", "A")]
    base, new = (twice, once) if side == "base" else (once, twice)
    with pytest.raises(DuplicatePairId, match=f"'p1' appears twice in the {side} release"):
        release_diff(base, new)
