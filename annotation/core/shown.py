"""Stored content as the pages and the API show it: text parts as they are, media parts as
media URLs with what a player needs; and what a page about one pair starts its context with.
The annotators' blinded view of an assignment (``annotation.queue.presentation``), the pair
page, adjudication and the judges' pages all show content through it."""

from __future__ import annotations

from annotation.core.media_keys import media_path
from annotation.models import Media, Pair, Project


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
    (absolute with ``request``, opaque ids only) with what a player needs (size, duration,
    poster, peaks, a 3D model's rendered views); one query for the media rows of all."""
    hashes = {part["media"] for content in contents for part in content if "media" in part}
    media = (
        {m.sha256: m for m in Media.objects.filter(sha256__in=hashes).only(*_SHOWN_MEDIA_FIELDS)}
        if hashes
        else {}
    )

    def url_of(sha256: str) -> str:
        url = media_path(slug=project.slug, sha256=sha256)
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
    "kind", "width", "height", "duration_seconds", "served_frame_rate", "poster_sha256",
    "peaks", "rendered_views", "loudness_lufs",
)  # fmt: skip


def _media_facts(row: Media, url_of) -> dict:
    """What a player shows of one media file: the content's own measures (pixels, duration,
    the served video's frame rate, the waveform, loudness), never the original's container,
    codecs, sample rate, channels, size or hash, which could tell one model's files from
    another's."""
    if row.kind == Media.Kind.IMAGE:
        return {"width": row.width, "height": row.height}
    facts: dict = {"duration_seconds": row.duration_seconds}
    if row.kind == Media.Kind.VIDEO:
        facts.update(width=row.width, height=row.height, frame_rate=row.served_frame_rate)
        if row.poster_sha256:
            facts["poster_url"] = url_of(row.poster_sha256)
    if row.kind == Media.Kind.AUDIO:
        facts["peaks"] = row.peaks or []
        facts["loudness_lufs"] = row.loudness_lufs
    if row.kind == Media.Kind.MODEL3D:
        facts.pop("duration_seconds")
        facts["views"] = [url_of(sha) for sha in row.rendered_views or []]
    return facts
