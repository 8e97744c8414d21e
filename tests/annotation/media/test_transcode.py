"""A video or audio file a browser cannot play is accepted at import, its original kept, and
gets one transcoded, playable copy without metadata, made by a Celery job whose progress and
failure the import page shows; its pairs reach the annotators only once their media play
(docs/import-format.md, "Transcoded copies")."""

from __future__ import annotations

import time
import zipfile
from io import StringIO
from pathlib import Path

import av
import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from kombu.exceptions import OperationalError

from annotation import tasks
from annotation.core.errors import Unavailable
from annotation.core.media_keys import media_path
from annotation.imports.services import import_job_submit
from annotation.media.transcode_jobs import transcode_job_retry, transcode_job_run
from annotation.models import Media, Pair, PairStatus, Role, TranscodeJob
from annotation.queue.serving import claimable_pairs
from tests.annotation.imports.conftest import upload, write_jsonl
from tests.annotation.media.conftest import PLANTED
from tests.annotation.media.test_import_av import (
    import_media,
    media_pair,
    original_path,
    served_path,
)
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

FPS = 10


def avi_write(path: Path, *, frames: int = 12, codec: str = "mpeg4", fmt: str = "avi") -> Path:
    """A 66x50 MPEG-4 Part 2 video (or ``codec`` in ``fmt``) of a moving bar with a tone in
    MP3, every tag naming PLANTED."""
    with av.open(str(path), "w", format=fmt) as container:
        for tag in ("title", "comment", "artist", "encoder", "copyright"):
            container.metadata[tag] = PLANTED
        video = container.add_stream(codec, rate=FPS)
        video.width, video.height = 66, 50
        video.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        video.metadata["title"] = PLANTED
        sound = container.add_stream("libmp3lame", rate=44100, layout="mono")
        sound.metadata["title"] = PLANTED
        for index in range(frames):
            pixels = np.zeros((50, 66, 3), np.uint8)
            pixels[:, index * 5 : index * 5 + 6] = (250, 40, 10)
            for packet in video.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                container.mux(packet)
        for packet in video.encode():
            container.mux(packet)
        rate = 44100
        tone = (0.4 * np.sin(2 * np.pi * 330 * np.arange(rate * frames // FPS) / rate)).astype(
            np.float32
        )
        pts = 0
        for start in range(0, len(tone), 1152):
            piece = tone[start : start + 1152].reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(piece, format="fltp", layout="mono")
            frame.sample_rate, frame.pts = rate, pts
            pts += piece.shape[1]
            for packet in sound.encode(frame):
                container.mux(packet)
        for packet in sound.encode():
            container.mux(packet)
    return path


def decoded_frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def wait_for(predicate, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError("timed out")


def test_an_avi_is_accepted_and_held_back_until_it_plays(project, alice, tmp_path, settings):
    source = avi_write(tmp_path / "clip.avi")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    media = Media.objects.get(kind="video")
    assert (media.format, media.container, media.video_codec) == ("MP4", "avi", "mpeg4")
    assert media.served_sha256 is None
    assert media.poster_sha256
    assert original_path(media, settings).read_bytes() == source.read_bytes()
    job = TranscodeJob.objects.get(media=media)
    assert job.status == TranscodeJob.Status.PENDING
    pair = Pair.objects.get(project=project)
    assert pair.media_pending
    Pair.objects.filter(pk=pair.pk).update(status=PairStatus.QUEUED)
    assert not claimable_pairs(project=project, annotator=alice).exists()


def test_the_transcoded_copy_plays_as_long_with_no_metadata(project, alice, tmp_path, settings):
    avi_write(tmp_path / "clip.avi")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    job = TranscodeJob.objects.get()
    transcode_job_run(job_id=job.pk)
    job.refresh_from_db()
    media = Media.objects.get(kind="video")
    assert job.status == TranscodeJob.Status.SUCCEEDED, job.error
    assert media.strip_result == Media.StripResult.TRANSCODED
    served = served_path(media, settings)
    assert PLANTED.encode() not in served.read_bytes()
    with av.open(str(served)) as copy:
        assert copy.format.name.startswith("mov,mp4")
        assert [s.codec_context.name for s in copy.streams] == ["h264", "aac"]
        assert PLANTED not in str(dict(copy.metadata))
        assert not any(PLANTED in str(dict(stream.metadata)) for stream in copy.streams)
        duration = copy.duration / av.time_base
    assert abs(duration - media.duration_seconds) <= 1 / FPS
    assert decoded_frames(served) == decoded_frames(original_path(media, settings)) == 12
    pair = Pair.objects.get(project=project)
    assert not pair.media_pending


def test_mjpeg_in_matroska_is_transcoded_too(project, tmp_path, settings):
    avi_write(tmp_path / "clip.mkv", codec="mjpeg", fmt="matroska")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.mkv", "clip.mkv")])
    media = Media.objects.get(kind="video")
    assert media.video_codec == "mjpeg"
    assert media.served_sha256 is None
    transcode_job_run(job_id=TranscodeJob.objects.get().pk)
    media.refresh_from_db()
    assert media.strip_result == Media.StripResult.TRANSCODED
    assert decoded_frames(served_path(media, settings)) == 12


def test_a_pair_waits_for_every_one_of_its_media(project, tmp_path):
    avi_write(tmp_path / "a.avi")
    avi_write(tmp_path / "b.avi", frames=8)
    import_media(project, tmp_path, [media_pair("v1", "video", "a.avi", "b.avi")])
    first, second = TranscodeJob.objects.order_by("media__duration_seconds")
    transcode_job_run(job_id=first.pk)
    assert Pair.objects.get().media_pending
    transcode_job_run(job_id=second.pk)
    assert not Pair.objects.get().media_pending


def test_a_failed_transcode_says_why_and_can_be_retried(
    project, carol, client_for, tmp_path, settings
):
    avi_write(tmp_path / "clip.avi")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    media = Media.objects.get(kind="video")
    job = TranscodeJob.objects.get()
    original = original_path(media, settings)
    kept = original.read_bytes()
    original.write_bytes(kept[: len(kept) // 3])
    transcode_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == TranscodeJob.Status.FAILED
    assert job.error.startswith("Cannot be transcoded: ")
    assert "truncated" in job.error
    assert Pair.objects.get().media_pending

    original.write_bytes(kept)
    client = client_for(carol)
    answer = client.post(reverse("transcode-retry", args=[project.slug, job.pk]), follow=True)
    job.refresh_from_db()
    # Tests run tasks eagerly: the retry transcoded it at once.
    assert job.status == TranscodeJob.Status.SUCCEEDED, job.error
    assert job.attempts == 2
    assert "sent to a worker again" in answer.content.decode()
    assert not Pair.objects.get().media_pending


def test_retry_when_the_broker_is_down_is_unavailable(project, tmp_path, monkeypatch):
    avi_write(tmp_path / "clip.avi")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    job = TranscodeJob.objects.get()
    TranscodeJob.objects.filter(pk=job.pk).update(status=TranscodeJob.Status.FAILED)

    def refuse(*args, **options):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.transcode_run, "apply_async", refuse)
    with pytest.raises(Unavailable, match="The task queue is unreachable"):
        transcode_job_retry(job=job)
    job.refresh_from_db()
    assert job.status == TranscodeJob.Status.FAILED
    assert "task queue is unreachable" in job.error
    assert "Retry it" in job.error


def test_an_import_while_the_broker_is_down_records_the_transcode_as_failed(
    project, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    def refuse(*args, **options):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    monkeypatch.setattr(tasks.transcode_run, "apply_async", refuse)
    avi_write(tmp_path / "clip.avi")
    with django_capture_on_commit_callbacks(execute=True):
        import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    assert Pair.objects.get().media_pending
    job = TranscodeJob.objects.get()
    assert job.status == TranscodeJob.Status.FAILED
    assert "task queue is unreachable" in job.error


def test_making_image_copies_leaves_a_waiting_video_alone(project, tmp_path):
    avi_write(tmp_path / "clip.avi")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    call_command("strip_media_metadata", "--all", stdout=StringIO())
    media = Media.objects.get(kind="video")
    assert (media.served_sha256, media.strip_result) == (None, None)


def test_the_media_view_and_retry_keep_to_the_project(
    project, other_project, carol, alice, client_for, tmp_path
):
    avi_write(tmp_path / "clip.avi")
    import_media(project, tmp_path, [media_pair("v1", "video", "clip.avi", "clip.avi")])
    media = Media.objects.get(kind="video")
    job = TranscodeJob.objects.get()
    client = client_for(carol)
    assert client.get(media_path(slug=project.slug, sha256=media.sha256)).status_code == 404
    outsider = UserFactory(username="olga")
    MembershipFactory(project=other_project, user=outsider, role=Role.CURATOR)
    url = reverse("transcode-retry", args=[other_project.slug, job.pk])
    assert client_for(outsider).post(url).status_code == 404
    url = reverse("transcode-retry", args=[project.slug, job.pk])
    assert client_for(alice).post(url).status_code == 403


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_transcodes_an_uploaded_avi(celery_worker_process, settings, tmp_path):
    """An upload large enough to go to a worker: the import, then the transcode, each a job
    whose progress the import page shows; then the served copy plays."""
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    project = ProjectFactory(slug="worker-transcode")
    curator = UserFactory(username="curator-t")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    celery_worker_process(queues="default", concurrency=1)
    archive = tmp_path / "media.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(avi_write(tmp_path / "clip.avi", frames=30), "clip.avi")
    pairs = write_jsonl(
        tmp_path / "p.jsonl", [media_pair("v1", "video", "clip.avi", "clip.avi")]
    ).read_bytes()
    job = import_job_submit(
        project=project,
        user=curator,
        upload=upload("p.jsonl", pairs),
        archive=upload("media.zip", archive.read_bytes()),
    )
    wait_for(lambda: TranscodeJob.objects.filter(status__in=["succeeded", "failed"]).exists())
    job.refresh_from_db()
    assert job.status == "succeeded", job.errors
    transcode = TranscodeJob.objects.get()
    assert transcode.import_job_id == job.pk
    assert transcode.status == "succeeded", transcode.error
    media = Media.objects.get(kind="video")
    served = served_path(media, settings)
    assert PLANTED.encode() not in served.read_bytes()
    assert decoded_frames(served) == 30
    with av.open(str(served)) as copy:
        assert abs(copy.duration / av.time_base - media.duration_seconds) <= 1 / FPS
    client = _client(curator)
    page = client.get(f"{reverse('imports', args=[project.slug])}?job={job.pk}").content.decode()
    assert f'id="transcode-{transcode.pk}"' in page
    assert "Playable" in page
    answer = client.get(media_path(slug=project.slug, sha256=media.sha256))
    assert answer.status_code == 200
    assert answer["Content-Type"] == "video/mp4"
    assert not Pair.objects.get(project=project).media_pending


def _client(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client
