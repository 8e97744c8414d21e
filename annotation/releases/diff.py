"""What changed between two releases of a project: the pairs added, removed and relabelled,
matched by the pair's external id (docs/releases.md, "Diff")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from annotation.core.errors import NotFound
from annotation.models import Release
from annotation.releases.selectors import release_rows


@dataclass(frozen=True)
class DiffRow:
    """The few fields of a release row the diff shows (never the prompt or responses)."""

    id: str
    label: str
    task: str = ""
    split: str = ""

    @classmethod
    def of(cls, row: Mapping) -> DiffRow:
        return cls(
            id=str(row["id"]),
            label=str(row["label"]),
            task=str(row.get("task") or ""),
            split=str(row.get("split") or ""),
        )


@dataclass(frozen=True)
class Relabelled:
    """A pair in both releases whose label differs: ``before`` in the older, ``after`` now."""

    id: str
    before: str
    after: str
    task: str = ""


@dataclass(frozen=True)
class ReleaseDiff:
    added: list[DiffRow] = field(default_factory=list)
    removed: list[DiffRow] = field(default_factory=list)
    relabelled: list[Relabelled] = field(default_factory=list)
    unchanged: int = 0

    @property
    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "removed": len(self.removed),
            "relabelled": len(self.relabelled),
            "unchanged": self.unchanged,
        }


class DuplicatePairId(ValueError):
    """A release holds the same pair id twice, so it cannot be matched."""


def _by_id(rows: Iterable[Mapping], side: str) -> dict[str, DiffRow]:
    by_id: dict[str, DiffRow] = {}
    for row in rows:
        entry = DiffRow.of(row)
        if entry.id in by_id:
            raise DuplicatePairId(f"id: pair {entry.id!r} appears twice in the {side} release")
        by_id[entry.id] = entry
    return by_id


def release_diff(base_rows: Iterable[Mapping], rows: Iterable[Mapping]) -> ReleaseDiff:
    """The pairs of ``rows`` (a release) against ``base_rows`` (the release it is compared
    with): added (only in ``rows``), removed (only in ``base_rows``), relabelled (in both,
    another label). Each row needs ``id`` and ``label``; ``task`` and ``split`` are kept for
    display. Every list is in id order. Only the small ``DiffRow`` of each pair is held."""
    base = _by_id(base_rows, "base")
    added: list[DiffRow] = []
    relabelled: list[Relabelled] = []
    unchanged = 0
    seen: set[str] = set()
    for row in rows:
        entry = DiffRow.of(row)
        if entry.id in seen:
            raise DuplicatePairId(f"id: pair {entry.id!r} appears twice in the compared release")
        seen.add(entry.id)
        before = base.pop(entry.id, None)
        if before is None:
            added.append(entry)
        elif before.label != entry.label:
            relabelled.append(Relabelled(entry.id, before.label, entry.label, entry.task))
        else:
            unchanged += 1
    return ReleaseDiff(
        added=sorted(added, key=lambda entry: entry.id),
        removed=sorted(base.values(), key=lambda entry: entry.id),
        relabelled=sorted(relabelled, key=lambda entry: entry.id),
        unchanged=unchanged,
    )


def releases_compare(*, release: Release, against: Release) -> ReleaseDiff:
    """``release`` against ``against``, another release of the same project, both built;
    read from their files. NotFound for a release of another project; Conflict when either
    has no files yet."""
    if against.project_id != release.project_id:
        raise NotFound(f"No release {against.version} in this project.")
    return release_diff(release_rows(against), release_rows(release))
