"""Media in the bucket (``ARBITER_STORAGE=s3``, moto's S3 server): an import of images, video,
audio and a 3D model writes every file to the bucket under keys that name no content hash and
leaves nothing on the local disk; members get the bytes through the app, each range from the
object's own bytes, outsiders a 404; judges read the media from the bucket."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import cast

import pytest

from annotation.core import storage
from annotation.core.media_keys import media_etag
from annotation.imports.importer import pairs_import
from annotation.media.judge_images import image_data_url
from annotation.media.judge_parts import audio_input, video_frames
from annotation.models import Media, Pair
from tests.annotation.imports.conftest import image_bytes, text_pair, write_jsonl
from tests.annotation.media.conftest import PLANTED, audio_write, glb_bytes, video_write

pytestmark = pytest.mark.django_db


def _all_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


@pytest.fixture
def imported(project, tmp_path, s3_storage, settings):
    """One pair of each kind, imported from a folder beside (not under) MEDIA_ROOT."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.png").write_bytes(image_bytes((200, 30, 30), size=(40, 30)))
    (source / "b.jpg").write_bytes(image_bytes((10, 90, 10), size=(40, 30), fmt="JPEG"))
    video_write(source / "a.mp4", frames=12)
    audio_write(source / "a.wav", seconds=0.5)
    (source / "a.glb").write_bytes(glb_bytes())
    pairs = []
    for number, (kind, name_a, name_b) in enumerate(
        [
            ("image", "a.png", "b.jpg"),
            ("video", "a.mp4", "a.mp4"),
            ("audio", "a.wav", "a.wav"),
            ("model3d", "a.glb", "a.glb"),
        ]
    ):
        pair = text_pair(f"p{number}", task=f"t2{kind}")
        pair["response_a"]["response_content"] = [[kind, name_a]]
        pair["response_b"]["response_content"] = [[kind, name_b]]
        pairs.append(pair)
    pairs_import(
        project=project, source=write_jsonl(source / "pairs.jsonl", pairs), media_root=source
    )
    return s3_storage


def test_an_import_writes_every_file_to_the_bucket_and_nothing_to_disk(imported, settings):
    assert _all_files(Path(settings.MEDIA_ROOT)) == []
    keys = imported.keys("media")
    names = set()
    for media in Media.objects.all():
        names.add(media.relative_path)
        if media.served_sha256:
            names.add(media.served_relative_path)
    # Originals, served copies, the video's poster and the model's rendered views.
    assert Media.objects.filter(kind="image").count() >= 4
    assert len(keys) == len(names)
    for name in names:
        assert storage.exists("media", name)
    hashes = {media.sha256 for media in Media.objects.all()}
    hashes |= {media.served_sha256 for media in Media.objects.all() if media.served_sha256}
    for key in keys:
        assert not any(sha[:16] in key for sha in hashes), key
    # The object holds the original's bytes.
    video = Media.objects.get(kind="video")
    assert hashlib.sha256(storage.read_bytes("media", video.relative_path)).hexdigest() == (
        video.sha256
    )


def test_members_get_ranges_from_the_bucket_and_outsiders_404(
    imported, project, alice, eve, api_for, client_for
):
    Pair.objects.filter(project=project).update(status="queued")
    api = api_for(alice)
    seen = 0
    while (claimed := api.post(f"/api/v1/projects/{project.slug}/claim/")).status_code == 200:
        data = claimed.json()
        text = json.dumps(data)
        for media in Media.objects.all():
            assert media.sha256 not in text
            assert (media.served_sha256 or media.sha256) not in text
        for part in data["left"] + data["right"]:
            if part["type"] != "video":
                continue
            url = part["url"]
            media = Media.objects.get(kind="video")
            assert media.served_sha256 is not None
            whole = storage.read_bytes("media", media.served_relative_path)
            response = api.get(url, headers={"Range": "bytes=100-1099"})
            assert response.status_code == 206
            assert b"".join(response.streaming_content) == whole[100:1100]
            assert response["Content-Range"] == f"bytes 100-1099/{len(whole)}"
            assert response["ETag"] == f'"{media_etag(media.served_sha256)}"'
            assert response["X-Content-Type-Options"] == "nosniff"
            assert "sandbox" in response["Content-Security-Policy"]
            assert not response.has_header("Last-Modified")
            head = api.head(url)
            assert head.status_code == 200
            assert head["Content-Length"] == str(len(whole))
            whole_response = api.get(url)
            assert b"".join(whole_response.streaming_content) == whole
            assert PLANTED.encode() not in whole
            assert client_for(eve).get(url).status_code == 404
            seen += 1
        assignment = data["id"]
        api.post(f"/api/v1/assignments/{assignment}/vote/", {"choice": "left"}, format="json")
    assert seen == 2


def test_judges_read_media_from_the_bucket(imported, settings, tmp_path):
    jpeg = hashlib.sha256((tmp_path / "source" / "b.jpg").read_bytes()).hexdigest()
    image = Media.objects.get(sha256=jpeg)
    url = image_data_url(image, max_side=16)  # made smaller: decoded from a local copy
    assert url.startswith("data:image/jpeg;base64,")
    frames = video_frames(Media.objects.get(kind="video"), count=3, max_side=32)
    assert len(frames) == 3
    clip = audio_input(Media.objects.get(kind="audio"))
    assert clip["format"] == "wav"
    assert clip["data"]
    # The copies they decoded are gone, and nothing came to the media folder.
    assert _all_files(Path(settings.MEDIA_ROOT)) == []


def test_a_file_missing_from_the_bucket_is_a_404_not_an_error(imported, project, client_for, carol):
    from annotation.core.media_keys import media_path

    media = Media.objects.get(kind="audio")
    storage.delete("media", media.served_relative_path)
    response = client_for(carol).get(media_path(slug=project.slug, sha256=media.sha256))
    assert response.status_code == 404


def test_nginx_is_handed_the_object_key_which_names_no_hash(
    imported, project, client_for, carol, settings
):
    from annotation.core.media_keys import media_path

    settings.ARBITER_MEDIA_ACCEL = "nginx"
    media = Media.objects.get(kind="video")
    assert media.served_sha256 is not None
    response = client_for(carol).get(media_path(slug=project.slug, sha256=media.sha256))
    assert response.status_code == 200
    key = storage.bucket_key("media", media.served_relative_path)
    assert response["X-Accel-Redirect"] == settings.ARBITER_MEDIA_ACCEL_PREFIX + key
    assert key in imported.keys("media")
    assert media.served_sha256[:16] not in key
    assert response["ETag"] == f'"{media_etag(media.served_sha256)}"'


def test_a_range_is_one_ranged_get_object_and_a_head_gets_no_body(
    imported, project, client_for, carol
):
    from annotation.core.media_keys import media_path

    calls: list[tuple[str, str | None]] = []

    def record(model, params, **kwargs):
        calls.append((model.name, params.get("headers", {}).get("Range")))

    events = storage.s3_client().meta.events
    events.register("before-call.s3", record, unique_id="test-record")
    try:
        media = Media.objects.get(kind="video")
        url = media_path(slug=project.slug, sha256=media.sha256)
        client = client_for(carol)
        assert client.head(url).status_code == 200
        assert calls == [("HeadObject", None)]
        for _ in range(2):
            calls.clear()
            response = client.get(url, headers={"Range": "bytes=10-19"})
            assert len(b"".join(response.streaming_content)) == 10
            assert calls == [("GetObject", "bytes=10-19")]
    finally:
        events.unregister("before-call.s3", unique_id="test-record")


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_celery_worker_imports_an_archive_into_the_bucket(
    celery_worker_process, s3_storage, settings, tmp_path
):
    """A real worker, told of the bucket by its environment as a deployment tells it, imports
    an archive's media into the bucket; the upload is gone afterwards and no media file is
    left on the local disk."""
    import io
    import time
    import zipfile

    from annotation.imports.services import import_job_submit
    from annotation.models import ImportJob, Project, Role
    from tests.annotation.imports.conftest import upload
    from tests.factories import MembershipFactory, ProjectFactory, UserFactory
    from tests.s3_server import CREDENTIALS

    project = cast(Project, ProjectFactory(slug="bucket-import"))
    curator = UserFactory(username="curator-bucket")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    celery_worker_process(
        queues="imports",
        concurrency=1,
        extra_env={
            "ARBITER_STORAGE": "s3",
            "ARBITER_S3_BUCKET": s3_storage.bucket,
            "ARBITER_S3_ENDPOINT_URL": s3_storage.server.url,
            "ARBITER_S3_PREFIX": s3_storage.prefix,
            **CREDENTIALS,
        },
    )
    audio_write(tmp_path / "a.wav", seconds=0.3)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("a.png", image_bytes((1, 2, 3), size=(20, 20)))
        bundle.writestr("b.png", image_bytes((3, 2, 1), size=(20, 20)))
        bundle.write(tmp_path / "a.wav", "a.wav")
    image_pair = text_pair("i1", task="t2i")
    image_pair["response_a"]["response_content"] = [["image", "a.png"]]
    image_pair["response_b"]["response_content"] = [["image", "b.png"]]
    audio_pair = text_pair("a1", task="t2a")
    audio_pair["response_a"]["response_content"] = [["audio", "a.wav"]]
    audio_pair["response_b"]["response_content"] = [["audio", "a.wav"]]
    lines = "".join(json.dumps(pair) + "\n" for pair in (image_pair, audio_pair)).encode()
    job = import_job_submit(
        project=project,
        user=curator,
        upload=upload("pairs.jsonl", lines),
        archive=upload("media.zip", archive.getvalue()),
        in_background=True,
    )
    deadline = time.monotonic() + 120
    while not job.finished and time.monotonic() < deadline:
        time.sleep(0.25)
        job.refresh_from_db()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    names = {media.relative_path for media in Media.objects.all()}
    names |= {media.served_relative_path for media in Media.objects.all()}
    assert len(s3_storage.keys("media")) == len(names) >= 4
    for name in names:
        assert storage.exists("media", name)
    assert _all_files(Path(settings.MEDIA_ROOT)) == []


def test_an_outdated_served_copy_is_rebuilt_from_the_bucket(
    imported, project, client_for, carol, settings, tmp_path
):
    """An image imported before served copies were rebuilt gets its copy on the first request:
    the original read from the bucket into a temporary copy, the rebuilt PNG written back."""
    from annotation.core.media_keys import media_path

    jpeg = hashlib.sha256((tmp_path / "source" / "b.jpg").read_bytes()).hexdigest()
    image = Media.objects.get(sha256=jpeg)  # its served copy is a PNG: another object
    served = image.served_relative_path
    storage.delete("media", served)
    Media.objects.filter(pk=image.pk).update(served_sha256=None, strip_result=None)
    response = client_for(carol).get(media_path(slug=project.slug, sha256=image.sha256))
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    image.refresh_from_db()
    assert image.strip_result == Media.StripResult.REBUILT
    assert storage.read_bytes("media", image.served_relative_path) == body
    assert _all_files(Path(settings.MEDIA_ROOT)) == []
