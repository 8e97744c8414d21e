"""What curators do to chosen pairs, shared by the queue page (pair ids typed) and the pairs
browser (pairs ticked): each action calls its service and says what it did."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from annotation.decisions import lifecycle
from annotation.models import Project
from annotation.pairs import services

# The gold choice that makes gold pairs ordinary again.
CLEAR_GOLD = "clear"
_GOLD_LABEL_NAMES = {"A": "A is better", "B": "B is better", "tie": "Tie"}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def gold_label_choices(project: Project) -> list[tuple[str, str]]:
    """The known answers a gold pair of this project can have, and clearing gold."""
    labels = [(label, _GOLD_LABEL_NAMES[label]) for label in services.gold_labels(project.scale)]
    return [*labels, (CLEAR_GOLD, "Not gold (clear)")]


def enqueue(*, project: Project, pair_ids: Sequence[int] | None) -> str:
    """Sends the chosen imported pairs (all imported ones for None) to the annotators."""
    count = lifecycle.pairs_enqueue(project=project, pair_ids=pair_ids)
    chosen = "" if pair_ids is None or len(pair_ids) == count else f" (of {len(pair_ids)} chosen)"
    return f"Sent {plural(count, 'imported pair')} to the annotators' queue{chosen}."


def set_priority(*, project: Project, pair_ids: Iterable[int], priority: int, actor) -> str:
    count = services.pairs_set_priority(
        project=project, pair_ids=pair_ids, priority=priority, actor=actor
    )
    return f"Priority {priority} set on {plural(count, 'pair')}."


def restrict(*, project: Project, pair_ids: Iterable[int], annotators: Sequence, actor) -> str:
    """Only ``annotators`` may claim the pairs from now on; none lifts the restriction."""
    count = services.pairs_restrict(
        project=project, pair_ids=pair_ids, annotators=annotators, actor=actor
    )
    if not annotators:
        return f"Restriction lifted on {plural(count, 'pair')}."
    names = ", ".join(user.get_username() for user in annotators)
    return f"{plural(count, 'pair')} restricted to {names}."


def set_gold(*, project: Project, pair_ids: Iterable[int], label: str, actor) -> str:
    """Makes the pairs gold with the known answer ``label``, or ordinary for CLEAR_GOLD."""
    if label == CLEAR_GOLD:
        count = services.pairs_clear_gold(project=project, pair_ids=pair_ids, actor=actor)
        return f"{plural(count, 'pair')} no longer gold."
    count = services.pairs_set_gold(project=project, pair_ids=pair_ids, label=label, actor=actor)
    return f"{plural(count, 'gold pair')} with the answer {label}."


def exclude(*, project: Project, pair_ids: Iterable[int], reason: str, actor) -> str:
    """Takes the pairs out of serving, decisions, releases and every figure."""
    count = services.pairs_exclude(project=project, pair_ids=pair_ids, reason=reason, actor=actor)
    return f"{plural(count, 'pair')} excluded."


def include(*, project: Project, pair_ids: Iterable[int], actor) -> str:
    """Gives excluded pairs back the status they had."""
    count = services.pairs_include(project=project, pair_ids=pair_ids, actor=actor)
    return f"{plural(count, 'excluded pair')} included again."
