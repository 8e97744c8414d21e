"""The rating scales in the two vocabularies Arbiter speaks: annotators choose in on-screen
terms (left, right, tie; likert6 1 = left much better .. 6 = right much better), votes are
stored in canonical terms (A, B, tie; likert6 6 = A much better, as in MMRB2).

Canonical values: binary and ternary 1 = B, 2 = tie, 3 = A; likert6 1..6 with 6 = A much better.
"""

from __future__ import annotations

from collections.abc import Iterable

from annotation.models import Scale, Side

# Keyed by the stored scale value: a project's ``scale`` is a plain string.
CHOICES: dict[str, tuple[str, ...]] = {
    Scale.BINARY: ("left", "right"),
    Scale.TERNARY: ("left", "tie", "right"),
}
LIKERT6_LABELS = (
    "Left much better",
    "Left better",
    "Left slightly better, or unsure",
    "Right slightly better, or unsure",
    "Right better",
    "Right much better",
)
_CHOICE_LABELS = {"left": "Left is better", "tie": "About the same", "right": "Right is better"}
# Canonical value -> words, per scale: what a stored vote says about A and B.
CANONICAL_WORDS: dict[str, dict[int, str]] = {
    Scale.LIKERT6: {
        6: "A much better",
        5: "A better",
        4: "A slightly better, or unsure",
        3: "B slightly better, or unsure",
        2: "B better",
        1: "B much better",
    },
    Scale.TERNARY: {3: "A better", 2: "About the same", 1: "B better"},
    Scale.BINARY: {3: "A better", 1: "B better"},
}
_CHOICE_ARROWS = {"left": "left", "tie": "down", "right": "right"}
_SIDE_VALUE = {Side.B: 1, Side.TIE: 2, Side.A: 3}
# Canonical values each scale stores.
SCALE_VALUES: dict[str, tuple[int, ...]] = {
    Scale.BINARY: (1, 3),
    Scale.TERNARY: (1, 2, 3),
    Scale.LIKERT6: (1, 2, 3, 4, 5, 6),
}
# Side codes index SIDES; a vote's side is the side it leans to (likert6: 4-6 A, 1-3 B, as
# MMRB2's rubric defines 4 and 3). The consensus rules (annotation/decisions/rules.py) and the
# agreement statistics (annotation/agreement/statistics.py) both read votes by them.
SIDES: tuple[str, ...] = (Side.B, Side.TIE, Side.A)
_B, _TIE, _A = range(len(SIDES))
SIDE_CODES: dict[str, dict[int, int]] = {
    Scale.BINARY: {1: _B, 3: _A},
    Scale.TERNARY: {1: _B, 2: _TIE, 3: _A},
    Scale.LIKERT6: {1: _B, 2: _B, 3: _B, 4: _A, 5: _A, 6: _A},
}
# Votes MMRB2's pairwise agreement leaves out: likert6 3 and 4 ("slightly better, or unsure"),
# ternary ties.
UNSURE_VALUES: dict[str, frozenset[int]] = {
    Scale.BINARY: frozenset(),
    Scale.TERNARY: frozenset({2}),
    Scale.LIKERT6: frozenset({3, 4}),
}
# Cohen's kappa between two raters is taken on the sides of their votes on at least this many
# shared pairs: the agreement statistics (annotation/agreement/statistics.py) compute it so, and
# the charts (annotation/charts/heatmap.py) say so of a cell without one.
MIN_SHARED_PAIRS_FOR_KAPPA = 20


class VoteInputError(ValueError):
    """A vote that does not fit the project's scale; the message names the field."""


def options_for(scale: str) -> list[dict]:
    """The scale's options in on-screen order: ``key`` is the number key that picks it,
    ``field``/``value`` what the vote form or API receives, ``arrow`` the arrow key, if any."""
    if scale == Scale.LIKERT6:
        return [
            {
                "key": str(value),
                "field": "value",
                "value": value,
                "label": label,
                "arrow": None,
                "tone": "left" if value <= 3 else "right",
            }
            for value, label in enumerate(LIKERT6_LABELS, start=1)
        ]
    return [
        {
            "key": str(position),
            "field": "choice",
            "value": choice,
            "label": _CHOICE_LABELS[choice],
            "arrow": _CHOICE_ARROWS[choice],
            "tone": choice,
        }
        for position, choice in enumerate(CHOICES[scale], start=1)
    ]


def option_label(scale: str, *, choice: str | None, value: int | None) -> str:
    """The label of the option an on-screen ``choice`` (or likert6 ``value``) picked."""
    picked = ("value", value) if choice is None else ("choice", choice)
    return next(o["label"] for o in options_for(scale) if (o["field"], o["value"]) == picked)


def canonical_vote(
    *, scale: str, left_is_a: bool, choice: str | None, value: int | None
) -> tuple[str, int]:
    """(side, canonical value) for an on-screen choice (binary, ternary) or value (likert6)."""
    if scale == Scale.LIKERT6:
        if choice is not None:
            raise VoteInputError('choice: this project rates on a 1-6 scale; send "value" instead')
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 6:
            raise VoteInputError(
                "value: must be an integer from 1 (left much better) to 6 (right much better)"
            )
        canonical = 7 - value if left_is_a else value
        return (Side.A if canonical >= 4 else Side.B), canonical
    allowed = CHOICES[scale]
    if value is not None:
        raise VoteInputError(f'value: this project uses choices; send "choice", one of {allowed}')
    if choice not in allowed:
        raise VoteInputError(f"choice: must be one of {', '.join(allowed)} (got {choice!r})")
    if choice == "tie":
        side = Side.TIE
    elif (choice == "left") == left_is_a:
        side = Side.A
    else:
        side = Side.B
    return side, _SIDE_VALUE[side]


def on_screen_vote(*, scale: str, left_is_a: bool, side: str, value: int) -> dict:
    """A stored vote back in the on-screen terms of an assignment shown with ``left_is_a``."""
    if scale == Scale.LIKERT6:
        return {"choice": None, "value": 7 - value if left_is_a else value}
    if side == Side.TIE:
        return {"choice": "tie", "value": None}
    return {"choice": "left" if (side == Side.A) == left_is_a else "right", "value": None}


def on_screen_words(*, scale: str, left_is_a: bool, side: str, value: int) -> str:
    """A stored vote as the annotator chose it on screen ("2 · Left better", "Right is better")."""
    shown = on_screen_vote(scale=scale, left_is_a=left_is_a, side=side, value=value)
    if shown["value"] is not None:
        return f"{shown['value']} \u00b7 {LIKERT6_LABELS[shown['value'] - 1]}"
    return _CHOICE_LABELS[shown["choice"]]


def screen_numbers(scale: str) -> dict[int, int]:
    """Canonical value -> its number on a page that shows A on the left and B on the right
    (adjudication): the scale's values counted from A's end, as that page's keys count (binary
    1 A, 2 B; ternary 1 A, 2 about the same, 3 B; likert6 1 A much better .. 6 B much better),
    the workbench's on-screen numbering with A on the left."""
    return {value: n for n, value in enumerate(sorted(SCALE_VALUES[scale], reverse=True), 1)}


def check_choice(field: str, value: str, allowed: Iterable[str]) -> None:
    """A ``ValueError`` naming ``field`` unless ``value`` is one of ``allowed``."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{field}: must be one of {', '.join(allowed)} (got {value!r})")


def side_of_value(scale: str, value: int) -> str:
    """The side (A, tie, B) a canonical value leans to: likert6 4-6 A and 1-3 B, as MMRB2's
    rubric defines 4 and 3; binary and ternary 3 A, 2 tie, 1 B."""
    return SIDES[SIDE_CODES[scale][value]]
