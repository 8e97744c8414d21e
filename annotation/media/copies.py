"""Whether a media file's served copy must be made (again): questions of its row alone, so
that a caller that seldom makes copies (a release's build) asks them without loading the
media module's codecs (annotation/media/services.py makes the copies)."""

from __future__ import annotations

from annotation.models import Media

_REBUILT_HERE = (Media.Kind.IMAGE, Media.Kind.MODEL3D)
AV_KINDS = (Media.Kind.VIDEO, Media.Kind.AUDIO)


def image_copy_outdated(media: Media) -> bool:
    """Whether ``media`` is an image or a 3D model whose served copy must be made (again): it
    has none, or one an earlier version stripped rather than rebuilt (or, failing, left the
    original)."""
    return media.kind in _REBUILT_HERE and media.strip_result != Media.StripResult.REBUILT


def av_copy_outdated(media: Media) -> bool:
    """Whether ``media`` is a video or audio clip whose served copy predates the re-encode
    (a remux, which kept what the remux did not know): it is not served until
    ``media_strip_metadata`` (``manage.py strip_media_metadata``) re-encodes it."""
    return media.kind in AV_KINDS and media.strip_result != Media.StripResult.REBUILT
