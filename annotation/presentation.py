"""What an annotator is shown of an assignment: the blinded view shared by the API and the
comparison page. Left and right only, in the order this assignment shows them; no model
names, no A/B, no pair status, judge outcome or other votes, no import id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import reverse

from annotation.models import Assignment, Media, Project
from annotation.scales import on_screen_vote, option_label, options_for

if TYPE_CHECKING:
    from annotation.services.queue import Undone


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


def shown_contents(contents: list[list[dict]], *, project: Project, request=None) -> list:
    """Stored content parts as pages and the API show them: text, and images as media URLs
    (absolute with ``request``) with their size; one query for the sizes of all."""
    hashes = {part["media"] for content in contents for part in content if part["type"] == "image"}
    media = (
        {m.sha256: m for m in Media.objects.filter(sha256__in=hashes).only("width", "height")}
        if hashes
        else {}
    )

    def parts(content: list[dict]) -> list[dict]:
        shown = []
        for part in content:
            if part["type"] == "text":
                shown.append({"type": "text", "text": part["text"]})
                continue
            url = reverse("media", args=[project.slug, part["media"]])
            image = {"type": "image", "url": request.build_absolute_uri(url) if request else url}
            if part["media"] in media:
                image["width"] = media[part["media"]].width
                image["height"] = media[part["media"]].height
            shown.append(image)
        return shown

    return [parts(content) for content in contents]


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
