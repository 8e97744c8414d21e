"""A media release's build loads the media module (PyAV, its codecs, an HTTP client) only
for a served copy it must make (annotation/releases/build.py; docs/releases.md, "Speed")."""

from __future__ import annotations

import sys

from annotation.models import Media
from tests.annotation.releases.conftest import archive_sha256
from tests.annotation.releases.test_release_media import _build, released  # noqa: F401


def test_a_build_whose_copies_are_all_made_never_imports_the_media_module(
    project,
    dave,
    released,  # noqa: F811 - the fixture imported above
    monkeypatch,
):
    assert not Media.objects.exclude(strip_result=Media.StripResult.REBUILT).exists()
    # Any import of it from here on fails.
    monkeypatch.setitem(sys.modules, "annotation.media.services", None)
    again = _build(project, dave, "2.0.0")
    assert again.status == "built"
    assert archive_sha256(again) == archive_sha256(released)
