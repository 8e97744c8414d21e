"""Sections other apps add to the pair page, so it can show what they know about a pair
(the judges' verdicts) without ``annotation`` importing them (docs/architecture.md).

An app registers a section once, from its ``AppConfig.ready()``: a template, and a function
that returns the template's context for one pair. The page renders them in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from annotation.models import Pair


@dataclass(frozen=True)
class PairSection:
    name: str
    template: str
    context_fn: Callable[[Pair], dict]


_SECTIONS: dict[str, PairSection] = {}


def register_pair_section(name: str, template: str, context_fn: Callable[[Pair], dict]) -> None:
    """Adds (or, under the same name, replaces) a section of the pair page."""
    _SECTIONS[name] = PairSection(name=name, template=template, context_fn=context_fn)


def pair_sections(pair: Pair) -> list[dict]:
    """Each registered section's ``name``, ``template`` and ``context`` for ``pair``."""
    return [
        {"name": s.name, "template": s.template, "context": s.context_fn(pair)}
        for s in _SECTIONS.values()
    ]
