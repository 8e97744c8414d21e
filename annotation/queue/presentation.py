"""What an annotator is shown of an assignment: the blinded view shared by the API and the
comparison page. Left and right only, in the order this assignment shows them; no model
names, no A/B, no pair status, judge outcome or other votes, no import id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import reverse

from annotation.core.scales import on_screen_vote, option_label, options_for
from annotation.models import Assignment, Media, Pair, Project

if TYPE_CHECKING:
    from annotation.queue.annotating import Undone


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


def pair_page_context(project: Project, role: str, pair: Pair, *, request=None) -> dict:
    """What a page about one pair (the pair page, adjudication) starts its context with: the
    project, the viewer's role, the pair, and its prompt and responses A and B as shown."""
    prompt, response_a, response_b = shown_contents(
        [pair.prompt.content, pair.response_a.content, pair.response_b.content],
        project=project,
        request=request,
    )
    return {
        "project": project,
        "role": role,
        "pair": pair,
        "prompt": prompt,
        "response_a": response_a,
        "response_b": response_b,
    }


def shown_contents(contents: list[list[dict]], *, project: Project, request=None) -> list:
    """Stored content parts as pages and the API show them: text, and media as media URLs
    (absolute with ``request``) with what a player needs (size, duration, poster, peaks, a
    3D model's rendered views); one
    query for the media rows of all."""
    hashes = {part["media"] for content in contents for part in content if "media" in part}
    media = (
        {m.sha256: m for m in Media.objects.filter(sha256__in=hashes).only(*_SHOWN_MEDIA_FIELDS)}
        if hashes
        else {}
    )

    def url_of(sha256: str) -> str:
        url = reverse("media", args=[project.slug, sha256])
        return request.build_absolute_uri(url) if request else url

    def parts(content: list[dict]) -> list[dict]:
        shown = []
        for part in content:
            if part["type"] == "text":
                shown.append({"type": "text", "text": part["text"]})
                continue
            item = {"type": part["type"], "url": url_of(part["media"])}
            row = media.get(part["media"])
            if row is not None:
                item.update(_media_facts(row, url_of))
            shown.append(item)
        return shown

    return [parts(content) for content in contents]


_SHOWN_MEDIA_FIELDS = (
    "kind", "width", "height", "duration_seconds", "frame_rate", "sample_rate", "channels",
    "poster_sha256", "peaks", "rendered_views", "loudness_lufs",
)  # fmt: skip


def _media_facts(row: Media, url_of) -> dict:
    """What a player shows of one media file; nothing that names where it came from."""
    if row.kind == Media.Kind.IMAGE:
        return {"width": row.width, "height": row.height}
    facts: dict = {"duration_seconds": row.duration_seconds}
    if row.kind == Media.Kind.VIDEO:
        facts.update(width=row.width, height=row.height, frame_rate=row.frame_rate)
        if row.poster_sha256:
            facts["poster_url"] = url_of(row.poster_sha256)
    if row.kind in (Media.Kind.VIDEO, Media.Kind.AUDIO) and row.sample_rate:
        facts.update(sample_rate=row.sample_rate, channels=row.channels)
    if row.kind == Media.Kind.AUDIO:
        facts["peaks"] = row.peaks or []
        facts["loudness_lufs"] = row.loudness_lufs
    if row.kind == Media.Kind.MODEL3D:
        facts.pop("duration_seconds")
        facts["views"] = [url_of(sha) for sha in row.rendered_views or []]
    return facts


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
