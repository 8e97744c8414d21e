"""A release's .tar.gz made from its skeleton, its index and its folder as it is read
(docs/releases.md, "The archive"): a build writes no archive, publishing takes its sha256,
a download from local disk answers ranges anywhere in it, and a release whose archive an
earlier build wrote whole keeps serving that file."""

from __future__ import annotations

import hashlib
import re
import tarfile

import pytest
from django.urls import reverse

from annotation.core import storage
from annotation.core.errors import Conflict
from annotation.models import Release
from annotation.releases.services import release_build, release_publish
from annotation.releases.stored import AREA, index_name, skeleton_name
from annotation.releases.stored_archive import archive_index, archive_write_out
from tests.annotation.releases.conftest import archive_sha256
from tests.annotation.releases.test_release_media import _build, released  # noqa: F401


def _body(answer) -> bytes:
    return b"".join(answer.streaming_content)


def test_a_media_release_downloads_whole_and_by_ranges_made_from_its_folder(
    project,
    dave,
    released,  # noqa: F811 - the fixture imported above
    client_for,
    tmp_path,
):
    assert not released.archive_path.exists()
    made = archive_sha256(released)
    published = release_publish(release=released, user=dave)
    assert published.archive_sha256 == made
    assert not published.archive_path.exists()  # each media byte is on disk once
    url = reverse("release-download", args=[project.slug, published.version])
    client = client_for(dave)
    answer = client.get(url)
    whole = _body(answer)
    assert answer.status_code == 200
    assert int(answer["Content-Length"]) == len(whole) == published.archive_size
    assert hashlib.sha256(whole).hexdigest() == published.archive_sha256
    assert answer["ETag"] == f'"{published.archive_sha256}"'
    (tmp_path / "got.tar.gz").write_bytes(whole)
    with tarfile.open(tmp_path / "got.tar.gz", "r:gz") as archive:
        videos = [m for m in archive.getmembers() if "/videos/" in m.name]
        relative = videos[0].name.split("/", 1)[1]
        assert archive.extractfile(videos[0]).read() == (published.folder / relative).read_bytes()
    index = archive_index(published)
    assert all(segment.crc is not None for segment in index.segments if segment.path)
    media = max(
        (s for s in index.segments if s.path and s.start + s.length + 50 < index.size),
        key=lambda segment: segment.length,
    )
    end_of_media = media.start + media.length
    for start, end in (
        (0, 9),
        (media.start + 100, end_of_media + 50),  # from inside a media member past its end
        (end_of_media - 4, len(whole) - 1),  # its trailer (the CRC) to the end
        (media.start + 10, media.start + 14),  # its first stored block's five bytes
    ):
        ranged = client.get(url, HTTP_RANGE=f"bytes={start}-{end}")
        assert ranged.status_code == 206
        assert ranged["Content-Range"] == f"bytes {start}-{end}/{len(whole)}"
        assert _body(ranged) == whole[start : end + 1], (start, end)
    head = client.head(url)
    assert (head.status_code, int(head["Content-Length"])) == (200, len(whole))
    # The outsider and the annotator get nothing of it.
    assert client_for(_outsider()).get(url).status_code == 404


def _outsider():
    from tests.factories import UserFactory

    return UserFactory(username="outsider")


def test_a_rebuild_removes_an_archive_an_earlier_build_wrote_whole(
    dave,
    released,  # noqa: F811 - the fixture imported above
):
    released.archive_path.write_bytes(b"an archive of the code before")
    rebuilt = release_build(release=Release.objects.get(pk=released.pk))
    assert rebuilt.status == Release.Status.BUILT
    assert not rebuilt.archive_path.exists()
    assert archive_index(rebuilt) is not None


def test_a_release_whose_archive_was_written_whole_keeps_serving_it(
    project,
    dave,
    released,  # noqa: F811 - the fixture imported above
    client_for,
):
    """As a build before the archive was made on download left a release: the archive a
    file whose sha256 the build recorded, no skeleton or index."""
    archived = archive_write_out(released, released.archive_path)
    storage.delete(AREA, index_name(released))
    storage.delete(AREA, skeleton_name(released))
    Release.objects.filter(pk=released.pk).update(archive_sha256=archived.sha256)
    published = release_publish(release=Release.objects.get(pk=released.pk), user=dave)
    assert (published.archive_sha256, published.archive_size) == (archived.sha256, archived.size)
    answer = client_for(dave).get(reverse("release-download", args=[project.slug, "1.0.0"]))
    body = _body(answer)
    assert hashlib.sha256(body).hexdigest() == archived.sha256
    assert body == released.archive_path.read_bytes()


def test_publishing_takes_each_media_members_crc_afresh(
    project,
    dave,
    released,  # noqa: F811 - the fixture imported above
    client_for,
    tmp_path,
):
    """CRCs an index holds from before (a publishing refused while a file was damaged, since
    repaired) are never trusted: the published archive reads back whole."""
    index = archive_index(released)
    for segment in index.segments:
        if segment.path:
            segment.crc = 12345
    storage.put_bytes(AREA, index_name(released), index.to_bytes())
    published = release_publish(release=released, user=dave)
    assert {s.crc for s in archive_index(published).segments if s.path} != {12345}
    answer = client_for(dave).get(reverse("release-download", args=[project.slug, "1.0.0"]))
    (tmp_path / "got.tar.gz").write_bytes(_body(answer))
    with tarfile.open(tmp_path / "got.tar.gz", "r:gz") as archive:
        for member in archive.getmembers():
            if member.isfile():
                archive.extractfile(member).read()  # each member's CRC checked at its end
    got = (tmp_path / "got.tar.gz").read_bytes()
    assert hashlib.sha256(got).hexdigest() == published.archive_sha256


def test_publishing_a_release_whose_media_file_changed_size_is_refused_naming_it(
    dave,
    released,  # noqa: F811 - the fixture imported above
):
    """The archive cannot be made from a file of another size; publishing says which file
    differs from the manifest (a conflict, not a server error)."""
    index = archive_index(released)
    video = next(s.path for s in index.segments if s.path.startswith("videos/"))
    target = released.folder / video
    data = target.read_bytes()
    target.unlink()  # the release's own file, not the stored one it linked
    target.write_bytes(data[: len(data) // 2])
    with pytest.raises(Conflict, match=re.escape(video)):
        release_publish(release=released, user=dave)
    assert Release.objects.get(pk=released.pk).status == Release.Status.BUILT
