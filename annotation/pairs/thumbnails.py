"""The pairs browser's thumbnails (docs/curators.md, "Pairs browser"): the first media part of
the prompt and of each response, shown as the image itself, a video's poster frame, an audio
clip's waveform drawn from its stored peaks (an inline SVG path, no script), or a 3D marker."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from annotation.core.media_keys import media_path
from annotation.models import Media, Project

# The waveform's box (the thumbnail's 48 px square) and its number of bars.
WAVE_SIZE = 48
WAVE_BARS = 16
_MEDIA_PARTS = ("image", "video", "audio", "model3d")


@dataclass(frozen=True)
class Thumbnail:
    kind: str  # image, video, audio or model3d
    url: str = ""  # the image, or the video's poster frame ("" when it has none)
    wave: str = ""  # an audio clip's waveform: the SVG path of its bars


def _first_media(content: Sequence[dict]) -> dict | None:
    return next((part for part in content if part["type"] in _MEDIA_PARTS), None)


def waveform_path(peaks: Sequence[float], *, bars: int = WAVE_BARS, size: int = WAVE_SIZE) -> str:
    """An SVG path of ``bars`` vertical bars centred on the middle line, each the loudest of
    its share of ``peaks`` (0..1); a silent clip is a flat line of 1-unit bars."""
    width = size / bars
    bar = width - 1  # a unit of space between bars
    path = []
    for index in range(bars):
        start = index * len(peaks) // bars
        end = max(start + 1, (index + 1) * len(peaks) // bars)
        level = min(1.0, max((float(value) for value in peaks[start:end]), default=0.0))
        height = max(1.0, level * (size - 4))
        top = (size - height) / 2
        path.append(f"M{index * width + 0.5:.4g} {top:.4g}h{bar:.4g}v{height:.4g}h-{bar:.4g}z")
    return "".join(path)


def pair_thumbnails(
    project: Project, contents: Iterable[Sequence[Sequence[dict]]]
) -> list[list[Thumbnail]]:
    """For each row's contents (prompt, response A, response B), the thumbnails of those with
    a media part; one query for the videos' posters and the clips' peaks, none when the rows
    hold only images."""
    firsts = [[_first_media(content) for content in row] for row in contents]
    av = {
        part["media"]
        for row in firsts
        for part in row
        if part is not None and part["type"] in ("video", "audio")
    }
    media = (
        {
            row.sha256: row
            for row in Media.objects.filter(sha256__in=av).only("poster_sha256", "peaks")
        }
        if av
        else {}
    )

    def url(sha256: str) -> str:
        return media_path(slug=project.slug, sha256=sha256)

    def thumbnail(part: dict) -> Thumbnail:
        kind = part["type"]
        if kind == "image":
            return Thumbnail(kind, url=url(part["media"]))
        row = media.get(part["media"])
        if kind == "video":
            poster = row.poster_sha256 if row is not None else None
            return Thumbnail(kind, url=url(poster) if poster else "")
        if kind == "audio":
            return Thumbnail(kind, wave=waveform_path((row.peaks if row else None) or []))
        return Thumbnail(kind)

    return [[thumbnail(part) for part in row if part is not None] for row in firsts]
