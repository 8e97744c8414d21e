"""What an annotator is shown of an assignment: the blinded view shared by the API and the
comparison page. Left and right only, in the order this assignment shows them; no model
names, no A/B, no pair status, judge outcome or other votes, no import id."""

from __future__ import annotations

from django.urls import reverse

from annotation.models import Assignment, ContentMixin, Media
from annotation.scales import options_for


def media_sizes(*contents: ContentMixin) -> dict[str, Media]:
    """The media of these prompts and responses, by hash, with their width and height."""
    hashes = {sha256 for content in contents for sha256 in content.media_hashes}
    if not hashes:
        return {}
    return {m.sha256: m for m in Media.objects.filter(sha256__in=hashes).only("width", "height")}


def shown_parts(
    content: list[dict], *, project_slug: str, media: dict[str, Media], request=None
) -> list[dict]:
    """Content parts as pages and the API show them: text, and images by their media URL
    (absolute with ``request``) with their size when known."""
    shown = []
    for part in content:
        if part["type"] == "text":
            shown.append({"type": "text", "text": part["text"]})
            continue
        url = reverse("media", args=[project_slug, part["media"]])
        image = {"type": "image", "url": request.build_absolute_uri(url) if request else url}
        if part["media"] in media:
            image["width"] = media[part["media"]].width
            image["height"] = media[part["media"]].height
        shown.append(image)
    return shown


def assignment_payload(assignment: Assignment, *, request=None) -> dict:
    """``id``, ``expires_at``, ``prompt``, ``left``, ``right`` (content parts), ``criterion``
    and ``options`` (the scale in on-screen order). Image URLs are absolute with ``request``."""
    pair = assignment.pair
    project = pair.project
    if assignment.left_is_a:
        left, right = pair.response_a, pair.response_b
    else:
        left, right = pair.response_b, pair.response_a
    media = media_sizes(pair.prompt, left, right)

    def parts(content: list[dict]) -> list[dict]:
        return shown_parts(content, project_slug=project.slug, media=media, request=request)

    return {
        "id": assignment.pk,
        "expires_at": assignment.expires_at,
        "prompt": parts(pair.prompt.content),
        "left": parts(left.content),
        "right": parts(right.content),
        "criterion": pair.criterion,
        "options": options_for(project.scale),
    }
