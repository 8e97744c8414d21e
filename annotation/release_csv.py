"""A release as one CSV for spreadsheets (docs/releases.md, "CSV"): a row per pair, the
messages as plain text, read from the release's files and streamed, with formula injection
neutralised by ``annotation.spreadsheets``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.http import StreamingHttpResponse

from annotation.models import Release
from annotation.releases.read import ReleaseRow
from annotation.services.releases import release_rows
from annotation.spreadsheets import csv_stream_response

IMAGE_MARK = "[image]"
HEADER = (
    "id",
    "split",
    "task",
    "criterion",
    "label",
    "source",
    "agreement",
    "votes",
    "chosen_model",
    "rejected_model",
    "prompt",
    "chosen",
    "rejected",
    "images",
    "chosen_images",
    "rejected_images",
    "ensemble_label",
    "ensemble_agreement",
)
_TEXT_COLUMNS = {"prompt", "chosen", "rejected"}
_LIST_COLUMNS = {"votes", "images", "chosen_images", "rejected_images"}


def message_text(messages: Sequence[dict[str, Any]] | None) -> str:
    """The text of a conversation column: each message's content, its image placeholders as
    ``[image]``, messages separated by a blank line."""
    texts = []
    for message in messages or ():
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        parts = [
            IMAGE_MARK if part.get("type") == "image" else str(part.get("text") or "")
            for part in content or ()
        ]
        texts.append("\n".join(parts))
    return "\n\n".join(texts)


def _cell(column: str, value: Any) -> object:
    if column in _TEXT_COLUMNS:
        return message_text(value)
    if column in _LIST_COLUMNS:
        return " ".join(str(item) for item in value or ())
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return value


def release_csv_cells(row: ReleaseRow) -> list[object]:
    """The cells of one pair of a release, in ``HEADER``'s order."""
    return [_cell(column, row.get(column)) for column in HEADER]


def release_csv_response(release: Release) -> StreamingHttpResponse:
    """The release as ``<slug>-<version>.csv``, written as the client reads it. Conflict
    (at once, not mid-download) when it has no files."""
    rows = release_rows(release)
    return csv_stream_response(
        f"{release.project.slug}-{release.version}.csv",
        HEADER,
        (release_csv_cells(row) for row in rows),
    )
