"""What an annotator is shown of an assignment: the blinded view shared by the API and the
comparison page. Left and right only, in the order this assignment shows them; no model
names, no A/B, no pair status, judge outcome or other votes, no import id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from annotation.core.scales import on_screen_vote, option_label, options_for
from annotation.core.shown import shown_contents
from annotation.models import Assignment

if TYPE_CHECKING:
    from annotation.queue.services.undo import Undone


def assignment_payload(assignment: Assignment, *, request=None) -> dict:
    """``id``, ``expires_at``, ``prompt``, ``left``, ``right`` (content parts), ``criterion``
    and ``options`` (the scale in on-screen order). Image URLs are absolute with ``request``."""
    pair = assignment.pair
    project = pair.project
    if assignment.left_is_a:
        left, right = pair.response_a, pair.response_b
    else:
        left, right = pair.response_b, pair.response_a
    prompt, left_parts, right_parts = shown_contents(
        [pair.prompt.content, left.content, right.content], project=project, request=request
    )
    return {
        "id": assignment.pk,
        "expires_at": assignment.expires_at,
        "prompt": prompt,
        "left": left_parts,
        "right": right_parts,
        "criterion": pair.criterion,
        "options": options_for(project.scale),
    }


def undone_answer(undone: Undone, *, scale: str) -> dict:
    """The answer an undo withdrew, in the terms it was given in: a vote's on-screen
    ``choice`` (or likert6 ``value``) with its option's ``label`` and ``rationale``, or a
    skip's ``reason`` with its ``label`` and ``note``; ``action`` says which."""
    if undone.vote is not None:
        vote = undone.vote
        shown = on_screen_vote(
            scale=scale, left_is_a=vote.left_is_a, side=vote.side, value=vote.value
        )
        label = option_label(scale, choice=shown["choice"], value=shown["value"])
        return {"action": "vote", **shown, "label": label, "rationale": vote.rationale}
    skip = undone.skip
    if skip is None:
        raise ValueError("an Undone holds a vote or a skip")
    return {
        "action": "skip",
        "reason": skip.reason,
        "label": skip.get_reason_display(),
        "note": skip.note,
    }
