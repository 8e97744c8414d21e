"""A published release's downloads, for the pages and the API alike (docs/releases.md,
"Downloads" and "CSV"): the archive and each file streamed with range requests (from the
bucket: a redirect to a short-lived presigned URL, after the same access check), and the
release as one CSV for spreadsheets (a row per pair, the messages as plain text, read from
the release's files, formula injection neutralised by ``annotation.core.spreadsheets``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase

from annotation.core import storage
from annotation.core.downloads import ranged_body_response, ranged_file_response
from annotation.core.errors import Conflict
from annotation.core.spreadsheets import csv_stream_response
from annotation.models import Release
from annotation.releases.files import content_type_for, release_file
from annotation.releases.read import ReleaseRow
from annotation.releases.selectors import release_rows
from annotation.releases.stored import AREA, archive_name, presigned_download
from annotation.releases.stored_archive import archive_index, archive_source

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
    ``[image]`` (a video's ``[video]``, an audio clip's ``[audio]``, a 3D model's
    ``[model3d]``), messages separated by a blank line."""
    texts = []
    for message in messages or ():
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        parts = [
            str(part.get("text") or "")
            if part.get("type") == "text"
            else IMAGE_MARK
            if part.get("type") == "image"
            else f"[{part.get('type')}]"
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


def check_downloadable(release: Release) -> None:
    """Conflict unless the release is published: a draft's files may still change."""
    if release.status != Release.Status.PUBLISHED:
        raise Conflict(
            f"Release {release.version} is {release.status}: downloads open once it is published."
        )


def release_archive_response(request: HttpRequest, release: Release) -> HttpResponseBase:
    """The release's .tar.gz; its ETag is the archive's sha256. From local disk it is made
    from the release's skeleton, index and folder as it is sent (a release built before that
    serves its archive file); on the bucket, publishing stored it as one object."""
    check_downloadable(release)
    index = None if storage.is_s3() else archive_index(release)
    if index is not None:
        source = archive_source(release)
        return ranged_body_response(
            request,
            size=lambda: index.size,
            body=lambda start, length: index.chunks(source, start=start, length=length),
            content_type="application/gzip",
            filename=release.archive_name,
            etag_value=release.archive_sha256,
        )
    return _stored_file_response(
        request,
        archive_name(release),
        filename=release.archive_name,
        content_type="application/gzip",
        etag_value=release.archive_sha256,
    )


def release_file_response(request: HttpRequest, release: Release, name: str) -> HttpResponseBase:
    """One file of the release by the name its manifest lists (NotFound for any other), as
    ``<slug>-<version>-<path with / as ->``; its ETag is the manifest's sha256 of it."""
    check_downloadable(release)
    stored, entry = release_file(release, name)
    return _stored_file_response(
        request,
        stored,
        filename=f"{release.project.slug}-{release.version}-{name.replace('/', '-')}",
        content_type=content_type_for(name),
        etag_value=entry.sha256,
    )


def _stored_file_response(
    request: HttpRequest, name: str, *, filename: str, content_type: str, etag_value: str
) -> HttpResponseBase:
    """A stored release file, after the caller's access check: streamed with range requests
    from local disk, or a redirect to a short-lived presigned URL of the bucket's object."""
    if storage.is_s3():
        return presigned_download(name, filename=filename, content_type=content_type)
    return ranged_file_response(
        request,
        storage.local_root(AREA) / name,
        filename=filename,
        content_type=content_type,
        etag_value=etag_value,
    )


def release_csv_response(release: Release) -> StreamingHttpResponse:
    """The release as ``<slug>-<version>.csv``, written as the client reads it."""
    check_downloadable(release)
    rows = release_rows(release)
    return csv_stream_response(
        f"{release.project.slug}-{release.version}.csv",
        HEADER,
        (release_csv_cells(row) for row in rows),
    )
