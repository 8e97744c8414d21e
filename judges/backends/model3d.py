"""3D parts as judges that read images receive them (docs/judges.md, "3D models"): a ``.glb``
as the views rendered at import (``Media.rendered_views``), a response given as rendered
views (the images of a text-to-3D task) as those images; either way each image follows the
text ``view k of n``, so the judge knows they are one model seen from several sides."""

from __future__ import annotations

import dataclasses

from judges.backends.base import JudgeItem, JudgeResult
from judges.core.images import media_rows

MODEL3D = "model3d"
# Task slugs whose responses are 3D models (Omni-RewardBench's t23d, and common spellings).
MODEL3D_TASK_PREFIXES = ("t23d", "text-to-3d", "text_to_3d", "text23d", "3d")


def is_model3d_task(task: str) -> bool:
    return (task or "").strip().lower().startswith(MODEL3D_TASK_PREFIXES)


def items_with_rendered_views(items: list[JudgeItem]) -> list[JudgeItem | JudgeResult]:
    """Each item with its 3D parts replaced by labelled image parts, or a permanent error
    naming the model whose views are missing."""
    hashes = {
        part["media"]
        for item in items
        for content in (item.prompt, item.first, item.second)
        for part in content
        if part.get("type") == MODEL3D
    }
    views = {sha: row.rendered_views or [] for sha, row in media_rows(hashes).items()}
    out: list[JudgeItem | JudgeResult] = []
    for item in items:
        try:
            out.append(
                dataclasses.replace(
                    item,
                    prompt=_shown(item.prompt, views, as_views=False),
                    first=_shown(item.first, views, as_views=is_model3d_task(item.task)),
                    second=_shown(item.second, views, as_views=is_model3d_task(item.task)),
                )
            )
        except _NoViews as exc:
            out.append(JudgeResult(outcome="error", error=str(exc)))
    return out


class _NoViews(Exception):
    pass


def _shown(content: list[dict], views: dict[str, list[str]], *, as_views: bool) -> list[dict]:
    if as_views and len(content) > 1 and all(part.get("type") == "image" for part in content):
        return _labelled([part["media"] for part in content])
    shown: list[dict] = []
    for part in content:
        if part.get("type") != MODEL3D:
            shown.append(part)
            continue
        rendered = views.get(part["media"])
        if not rendered:
            raise _NoViews(
                f"3D model {part['media'][:12]} has no rendered views (imported before views "
                "were rendered at import: run manage.py render_model_views)"
                if rendered is not None
                else f"3D model {part['media'][:12]} is not in the media store"
            )
        shown.extend(_labelled(rendered))
    return shown


def _labelled(hashes: list[str]) -> list[dict]:
    parts: list[dict] = []
    for number, sha in enumerate(hashes, start=1):
        parts.append({"type": "text", "text": f"view {number} of {len(hashes)}"})
        parts.append({"type": "image", "media": sha})
    return parts
