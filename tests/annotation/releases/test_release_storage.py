"""Releases with ARBITER_STORAGE=s3 against moto's S3 server (docs/releases.md, "Where
releases are kept"): built in a local work folder, stored in the bucket and read back against
their hashes, nothing left on local disk; read (rows, CSV, training data, publishing's check)
from the bucket; downloaded by researchers through a short-lived presigned URL after the
access check; a file changed in the bucket stops the release from being published."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from annotation.core import storage
from annotation.core.errors import Conflict
from annotation.models import Release
from annotation.releases.selectors import release_rows
from annotation.releases.services import release_publish
from judges.reward_model.data import release_pairs
from tests.annotation.releases.conftest import archive_sha256, built_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def in_bucket(filled, s3_storage):
    """``filled``'s media moved to the bucket, as ``migrate_storage`` moves them."""
    root = Path(settings.MEDIA_ROOT)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        storage.put_file("media", path.relative_to(root).as_posix(), path)
        path.unlink()
    return s3_storage


def _local_files() -> list[Path]:
    roots = (Path(settings.MEDIA_ROOT), Path(settings.ARBITER_RELEASE_ROOT))
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


def test_a_release_is_stored_in_the_bucket_and_verified_and_nothing_stays_on_disk(
    filled, dave, in_bucket
):
    release = built_release(filled, dave, original_media=True)
    assert release.status == Release.Status.BUILT, release.error
    keys = in_bucket.keys("releases")
    base = f"{in_bucket.prefix}/releases/{filled.slug}"
    assert f"{base}/{release.version}/manifest.json" in keys
    # The archive is stored at publishing: a build stores its skeleton and index.
    assert f"{base}/{release.archive_name}" not in keys
    assert f"{base}/{release.archive_name}.skeleton" in keys
    assert f"{base}/{release.archive_name}.index.json" in keys
    manifest = json.loads(storage.read_bytes("releases", f"{filled.slug}/1.0.0/manifest.json"))
    assert manifest["files"]
    for name, entry in manifest["files"].items():
        data = storage.read_bytes("releases", f"{filled.slug}/1.0.0/{name}")
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
    assert any(name.startswith("images/") for name in manifest["files"])
    assert _local_files() == []
    # Read back from the bucket: its rows and the reward model's training data.
    assert len(list(release_rows(release))) == release.pair_count
    assert release_pairs(release).pairs
    published = release_publish(release=release, user=dave)
    assert published.status == Release.Status.PUBLISHED
    archive = storage.read_bytes("releases", f"{filled.slug}/{release.archive_name}")
    assert hashlib.sha256(archive).hexdigest() == published.archive_sha256
    assert len(archive) == published.archive_size
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        images = [m for m in tar if m.name.startswith(f"{filled.slug}/images/")]
        assert any(member.name.endswith("manifest.json") for member in tar)
        assert images
        name = images[0].name.split("/", 1)[1]
        stored = storage.read_bytes("releases", f"{filled.slug}/1.0.0/{name}")
        assert tar.extractfile(images[0]).read() == stored
    assert _local_files() == []


def test_a_file_changed_in_the_bucket_stops_publishing(filled, dave, in_bucket):
    release = built_release(filled, dave, original_media=True)
    manifest = json.loads(storage.read_bytes("releases", f"{filled.slug}/1.0.0/manifest.json"))
    name = next(name for name in manifest["files"] if name.endswith(".jsonl"))
    storage.put_bytes("releases", f"{filled.slug}/1.0.0/{name}", b"{}\n")
    with pytest.raises(Conflict, match=name):
        release_publish(release=release, user=dave)


def test_a_rebuild_leaves_no_file_of_the_earlier_build(filled, dave, in_bucket):
    release = built_release(filled, dave, original_media=True)
    stray = f"{filled.slug}/1.0.0/images/stray.png"
    storage.put_bytes("releases", stray, b"old")
    from annotation.releases.services import release_build

    # An archive stored by an earlier publishing attempt (or an older build) goes too: the
    # release's archive is made from its new skeleton when it is published.
    storage.put_bytes("releases", f"{filled.slug}/{release.archive_name}", b"old archive")
    release_build(release=release)
    assert not storage.exists("releases", stray)
    assert not storage.exists("releases", f"{filled.slug}/{release.archive_name}")


def test_researchers_download_through_a_short_presigned_url_after_the_access_check(
    filled, dave, alice, eve, in_bucket, client_for, settings
):
    settings.ARBITER_PRESIGNED_DOWNLOAD_S = 120
    release = release_publish(release=built_release(filled, dave, original_media=True), user=dave)
    slug, version = filled.slug, release.version
    archive_url = reverse("release-download", args=[slug, version])
    file_url = reverse("release-file", args=[slug, version, "manifest.json"])
    for persona, status in ((alice, 403), (eve, 404)):
        assert client_for(persona).get(archive_url).status_code == status
    client = client_for(dave)
    answer = client.get(archive_url)
    assert answer.status_code == 302
    location = answer["Location"]
    query = parse_qs(urlparse(location).query)
    assert _expires_in(query) <= 120
    fetched = httpx.get(location, timeout=30)
    assert fetched.status_code == 200
    assert hashlib.sha256(fetched.content).hexdigest() == release.archive_sha256
    assert release.archive_name in fetched.headers["content-disposition"]
    manifest = httpx.get(client.get(file_url)["Location"], timeout=30)
    assert hashlib.sha256(manifest.content).hexdigest() == release.manifest_sha256
    # The API answers alike.
    api = client.get(reverse("api-release-download", args=[slug, version]))
    assert api.status_code == 302


def _expires_in(query: dict[str, list[str]]) -> float:
    """How long a presigned URL stays good: SigV4 says it, SigV2 gives the moment."""
    if "X-Amz-Expires" in query:
        return int(query["X-Amz-Expires"][0])
    return int(query["Expires"][0]) - time.time()


def test_the_command_line_copies_a_stored_release_out(filled, dave, in_bucket, tmp_path):
    out = tmp_path / "out"
    call_command(
        "create_release",
        filled.slug,
        "--version",
        "1.0.0",
        "--original-media",
        "--out",
        str(out),
        stdout=io.StringIO(),
    )
    release = Release.objects.get(project=filled, version="1.0.0")
    copied = out / f"{filled.slug}-1.0.0"
    data = (copied / "manifest.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == release.manifest_sha256
    archive = (out / release.archive_name).read_bytes()
    assert release.archive_sha256 == ""  # built, not published
    assert hashlib.sha256(archive).hexdigest() == archive_sha256(release)
    assert len(archive) == release.archive_size
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert tar.extractfile(f"{filled.slug}/manifest.json").read() == data


def test_migrate_storage_stores_the_archive_a_local_release_made_on_download(
    filled, dave, client_for, request
):
    """A release published on local disk has no archive file (docs/releases.md, "The
    archive"); moved to the bucket, its archive is made there once, so that its download is
    presigned like any other."""
    published = release_publish(release=built_release(filled, dave, original_media=True), user=dave)
    assert not published.archive_path.exists()
    request.getfixturevalue("s3_storage")
    out = io.StringIO()
    call_command("migrate_storage", "--dry-run", stdout=out)
    assert "published release archives would be made in the bucket (their" in out.getvalue()
    assert "are presigned there): 1" in out.getvalue()
    assert not storage.exists("releases", f"{filled.slug}/{published.archive_name}")
    out = io.StringIO()
    call_command("migrate_storage", stdout=out)
    assert "are presigned there): 1" in out.getvalue()
    answer = client_for(dave).get(reverse("release-download", args=[filled.slug, "1.0.0"]))
    assert answer.status_code == 302
    fetched = httpx.get(answer["Location"], timeout=30)
    assert hashlib.sha256(fetched.content).hexdigest() == published.archive_sha256
    again = io.StringIO()
    call_command("migrate_storage", "--area", "releases", stdout=again)
    assert "are presigned there): 0" in again.getvalue()  # there with its hash: skipped


def test_an_archive_the_bucket_gives_back_different_stops_publishing(
    filled, dave, in_bucket, monkeypatch
):
    release = built_release(filled, dave, original_media=True)
    monkeypatch.setattr(
        "annotation.releases.stored_archive.stored_sha256", lambda name: ("0" * 64, 0)
    )
    with pytest.raises(Conflict, match=r"the archive: .*was stored as sha256 0{64}"):
        release_publish(release=release, user=dave)
    assert Release.objects.get(pk=release.pk).status == Release.Status.BUILT
