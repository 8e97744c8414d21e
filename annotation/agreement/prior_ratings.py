"""Prior ratings of each response (MMRB2's reasoning file: ``human_annotations`` as
``{"response_a_ratings": ["B", "B", "B"], "response_b_ratings": ["C", "C", "C"]}``), stored as
``PriorAnnotation`` rows with a ``response`` and a ``rating`` and no vote value. Shown to
curators on the pair and adjudication pages, written in releases; never votes, and never on
an annotator's page."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

RESPONSES = ("A", "B")
# The MMRB2 key of each response's ratings (annotation.imports.validate reads the same keys).
MMRB2_KEYS = {"A": "response_a_ratings", "B": "response_b_ratings"}


@dataclass(frozen=True)
class ResponseRatings:
    """One response's ratings, as given, and how many times each rating was given."""

    response: str
    ratings: tuple[str, ...]

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(rating, count), most given first, then in the order first given."""
        return Counter(self.ratings).most_common()


def ratings_by_response(rows: Iterable[tuple[str, str]]) -> list[ResponseRatings]:
    """Both responses' ratings from ``(response, rating)`` rows in position order; empty
    when the pair has none (a response without ratings keeps an empty entry otherwise)."""
    given: dict[str, list[str]] = {response: [] for response in RESPONSES}
    seen = False
    for response, rating in rows:
        if rating:
            given[response].append(rating)
            seen = True
    if not seen:
        return []
    return [ResponseRatings(response, tuple(given[response])) for response in RESPONSES]


def mmrb2_ratings(rows: Iterable[tuple[str, str]]) -> dict[str, list[str]] | None:
    """The ratings as MMRB2's reasoning file writes ``human_annotations``; None without any."""
    ratings = ratings_by_response(rows)
    if not ratings:
        return None
    return {MMRB2_KEYS[entry.response]: list(entry.ratings) for entry in ratings}
