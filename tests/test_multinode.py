"""Arbiter on several machines (docs/deploy.md, "The multi-node test"), all on loopback: two
gunicorn web nodes (A and B) and two Celery workers (1 and 2), each started by its
``deploy/commands.sh`` line with empty local folders of its own, on one PostgreSQL behind
PgBouncer in transaction mode (a pool smaller than their connections), Redis, and moto's S3
server. Through HTTP only: a curator imports an Omni-RewardBench file with an image, a
video, an audio clip and 3D models through A; annotators claim and vote through B until
the pairs are decided; a media range is the same bytes through either node; a filter run
and a release build finish on whichever worker takes them; the release is downloaded
through A from its presigned URL and its hashes verify. Then a worker is killed (SIGKILL)
inside an import: the import completes once, on the other worker, after the broker hands
its message out again. Nothing stays on any machine's local disk; both nodes are ready."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.db import connection, transaction
from PIL import Image
from rest_framework.authtoken.models import Token

from annotation.models import ImportJob, Pair, Role
from config.queues import ALL_QUEUES
from tests import pgbouncer
from tests.annotation.media.conftest import audio_write, glb_bytes, video_write
from tests.factories import (
    JudgeFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    UserFactory,
)
from tests.multinode import (
    KILL_AFTER_S,
    TIME_LIMIT_S,
    Node,
    files_left,
    node_env,
    oldest_leftover_age_s,
    poll,
    shared_env,
    wait_for,
    web_node,
)

pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(pgbouncer.skip_reason() is not None, reason=pgbouncer.skip_reason() or ""),
]

SLUG = "multinode"
POOL_SIZE = 4  # for 2 nodes x 2 gunicorn workers, 2 workers x 2 pool processes, and more
JOB_S = 60
# The workers' scratch sweep leaves what is younger (annotation/core/scratch.py).
LONGEST_JOB_S = TIME_LIMIT_S + KILL_AFTER_S


def _media_archive(folder: Path) -> bytes:
    """A zip of an image, a PyAV-made video and audio clip, and two GLB models."""
    folder.mkdir()
    Image.new("RGB", (16, 12), (200, 30, 30)).save(folder / "i1.png")
    video_write(folder / "v1.mp4", frames=3)
    audio_write(folder / "a1.wav", seconds=0.2)
    (folder / "m1.glb").write_bytes(glb_bytes())
    (folder / "m2.glb").write_bytes(glb_bytes(generator="other"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return buffer.getvalue()


def _omni_file(ids: list[str]) -> bytes:
    """Omni-RewardBench's text-to-3D records, each prompt with an image, a video and audio."""
    records = [
        {
            "id": record_id,
            "prompt": f"Model the object {record_id}",
            "image_path": "i1.png",
            "video": "v1.mp4",
            "audio_path": "a1.wav",
            "response1_path": "m1.glb",
            "response2_path": "m2.glb",
            "model1": "alpha-model",
            "model2": "beta-model",
            "criteria": "Faithful to the prompt",
            "criteria_preference": "response1",
        }
        for record_id in ids
    ]
    return json.dumps(records).encode()


def _import(node: Node, token: str, ids: list[str], archive: bytes) -> dict:
    """Posts an import to ``node``; the job as the API answers (queued for a worker)."""
    with node.api(token) as api:
        answer = api.post(
            f"/api/v1/projects/{SLUG}/imports/",
            files={
                "file": ("text_to_3d_preferences.json", _omni_file(ids), "application/json"),
                "media_archive": ("media.zip", archive, "application/zip"),
            },
        )
    assert answer.status_code == 201, answer.text[:1000]
    return answer.json()


def _import_finished(node: Node, token: str, job_id: int) -> dict:
    with node.api(token) as api:
        return poll(
            api,
            f"/api/v1/projects/{SLUG}/imports/{job_id}/",
            lambda job: job["status"] not in ("pending", "running"),
            JOB_S,
        )


def _media_urls(body: object) -> set[str]:
    """Every media part's URL in an API answer."""
    if isinstance(body, dict):
        found = {body["url"]} if body.get("type") != "text" and "url" in body else set()
        return found.union(*(_media_urls(value) for value in body.values()))
    if isinstance(body, list):
        return set().union(*(_media_urls(value) for value in body))
    return set()


def _annotate(node: Node, token: str) -> tuple[int, set[str]]:
    """Claims and votes through ``node`` in the one-request loop (each vote brings the
    next assignment) until nothing is left; the votes and the media URLs seen."""
    votes, urls = 0, set()
    with node.api(token) as api:
        answer = api.post(f"/api/v1/projects/{SLUG}/claim/")
        assignment = answer.json() if answer.status_code == 200 else None
        assert answer.status_code in (200, 204), answer.text[:500]
        while assignment is not None:
            urls |= _media_urls(assignment)
            answer = api.post(
                f"/api/v1/assignments/{assignment['id']}/vote/",
                json={"choice": "left", "next": True},
            )
            assert answer.status_code == 201, answer.text[:500]
            votes += 1
            assignment = answer.json().get("next")
    return votes, urls


def _same_range_through_both(nodes: list[Node], token: str, url: str) -> None:
    """The whole file and a range of it, through each node: the same bytes everywhere."""
    bodies = []
    for node in nodes:
        with node.api(token) as api:
            whole = api.get(url)
            assert whole.status_code == 200, (node.name, url, whole.text[:300])
            part = api.get(url, headers={"Range": "bytes=3-20"})
            assert part.status_code == 206, (node.name, url)
            assert part.headers["Content-Range"] == f"bytes 3-20/{len(whole.content)}"
            assert part.content == whole.content[3:21]
            assert "Last-Modified" not in part.headers
            bodies.append((whole.content, part.headers.get("ETag")))
    assert bodies[0] == bodies[1], url


def _filter_run(node: Node, token: str) -> dict:
    with node.api(token) as api:
        answer = api.post(f"/api/v1/projects/{SLUG}/filter-runs/", json={"judges": ["sanity"]})
        assert answer.status_code == 201, answer.text[:500]
        url = f"/api/v1/projects/{SLUG}/filter-runs/{answer.json()['number']}/"
        return poll(api, url, lambda run: run["status"] not in ("pending", "running"), JOB_S)


def _release_verified(node: Node, token: str) -> dict:
    """Creates, builds, publishes and downloads release 1.0.0 through ``node``; checks the
    archive's hash and every file's against the manifest."""
    base = f"/api/v1/projects/{SLUG}/releases/"
    with node.api(token) as api:
        answer = api.post(base, json={"version": "1.0.0"})
        assert answer.status_code == 201, answer.text[:500]
        built = poll(api, f"{base}1.0.0/", lambda r: r["status"] in ("built", "failed"), JOB_S)
        assert built["status"] == "built", built["error"]
        published = api.post(f"{base}1.0.0/publish/")
        assert published.status_code == 200, published.text[:500]
        redirect = api.get(f"{base}1.0.0/download/")
    assert redirect.status_code in (302, 307), redirect.status_code
    presigned = redirect.headers["Location"]
    assert presigned.startswith("http://127.0.0.1:")  # the bucket's, not a node's
    archive = httpx.get(presigned, timeout=60)  # no credentials: the URL is enough
    assert archive.status_code == 200
    assert built["archive_sha256"] == ""  # taken when it is published
    with node.api(token) as api:
        published_release = api.get(f"{base}1.0.0/").json()
    assert hashlib.sha256(archive.content).hexdigest() == published_release["archive_sha256"]
    assert len(archive.content) == published_release["archive_size"] == built["archive_size"]
    manifest = built["manifest"]
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        members = {member.name: member for member in tar if member.isfile()}
        top = next(name for name in members if name.endswith("manifest.json"))
        folder = top[: -len("manifest.json")]
        assert manifest["files"]
        for name, entry in manifest["files"].items():
            data = tar.extractfile(members[folder + name]).read()  # type: ignore[union-attr]
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
    return built


def _hold_pair_id(project, external_id: str, held: threading.Event, done: threading.Event):
    """Inserts a pair with ``external_id`` and keeps its transaction open until ``done``: an
    import writing a pair of that id waits on it, inside its work."""
    try:
        with transaction.atomic():
            PairFactory(project=project, external_id=external_id)
            held.set()
            done.wait(120)
            transaction.set_rollback(True)
    finally:
        connection.close()


def _finished_early(job_id: int) -> bool:
    job = ImportJob.objects.get(pk=job_id)
    assert job.finished_at is None, (job.status, job.errors)
    return False


def _waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@pytest.fixture
def deployment(transactional_db, celery_worker_process, s3_storage, tmp_path):
    """Nodes A and B and workers 1 and 2, each on its own folder under ``tmp_path``."""
    if (reason := pgbouncer.skip_reason()) is not None:
        pytest.skip(reason)
    with pgbouncer.PgBouncer.for_database(connection.settings_dict, pool_size=POOL_SIZE) as pool:
        env = shared_env(database_url=pool.url, bucket=s3_storage)
        nodes: list[Node] = []
        workers: dict = {}

        def start_worker(name: str) -> None:
            workers[name] = celery_worker_process(
                queues=ALL_QUEUES,
                concurrency=2,
                extra_env={**env, **node_env(tmp_path / f"worker-{name}")},
            )

        try:
            for name in ("a", "b"):
                nodes.append(web_node(name, tmp_path / f"node-{name}", env))
            for name in ("1", "2"):
                start_worker(name)
            yield nodes, workers, start_worker, tmp_path
        finally:
            for node in nodes:
                node.server.stop()
            for worker in workers.values():  # before PgBouncer goes
                worker.stop()


@pytest.mark.timeout(240)
def test_two_web_nodes_and_two_workers_share_the_bucket_and_the_pooled_database(deployment):
    (node_a, node_b), workers, start_worker, root = deployment
    project = ProjectFactory(slug=SLUG, overlap=1, min_agree=1, max_extra_votes=0)
    tokens = {}
    for name, role in (
        ("curator", Role.CURATOR),
        ("ann-1", Role.ANNOTATOR),
        ("ann-2", Role.ANNOTATOR),
    ):
        user = UserFactory(username=name)
        MembershipFactory(project=project, user=user, role=role)
        tokens[name] = Token.objects.create(user=user).key
    JudgeFactory(name="sanity")
    archive = _media_archive(root / "source")

    job = _import(node_a, tokens["curator"], ["p1", "p2", "p3"], archive)
    job = _import_finished(node_a, tokens["curator"], job["id"])
    assert (job["status"], job["created_pairs"]) == ("succeeded", 3), job["errors"]

    run = _filter_run(node_a, tokens["curator"])
    assert run["status"] == "succeeded", run

    # Both annotators at once, each pair decided by one vote (overlap 1).
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda name: _annotate(node_b, tokens[name]), ["ann-1", "ann-2"]))
    assert sum(votes for votes, _ in done) == 3
    urls = set().union(*(seen for _, seen in done))
    decided = Pair.objects.filter(project=project, status="consensus")
    assert sorted(decided.values_list("external_id", flat=True)) == [
        "t23d/p1",
        "t23d/p2",
        "t23d/p3",
    ]
    assert len(urls) >= 4  # image, video, audio, model (and the model's views)
    for url in sorted(urls):
        _same_range_through_both([node_a, node_b], tokens["ann-1"], url)

    release = _release_verified(node_a, tokens["curator"])
    assert release["pair_count"] == 3

    killed = _killed_inside_an_import(project, node_a, tokens["curator"], workers, archive)
    for node in (node_a, node_b):
        ready = httpx.get(f"{node.url}/readyz", timeout=10)
        assert ready.status_code == 200, (node.name, ready.text)

    # What the killed worker's job had in its scratch folders goes when it starts again (as
    # its container is restarted), once older than the longest a job may run.
    folder = root / f"worker-{killed}"
    time.sleep(max(0.0, LONGEST_JOB_S + 1 - oldest_leftover_age_s(folder)))
    start_worker(killed)
    wait_for(lambda: " ready." in workers[killed].log(), 60, "the restarted worker")
    # Every process stopped as its container would be: nothing stays on any machine's disk.
    for process in [node.server.process for node in (node_a, node_b)] + [
        worker.process for worker in workers.values()
    ]:
        process.terminate()  # to the process the container runs, as `docker stop` does
    for process in [node.server.process for node in (node_a, node_b)] + [
        worker.process for worker in workers.values()
    ]:
        process.wait(60)
    folders = [root / name for name in ("node-a", "node-b", "worker-1", "worker-2")]
    left = {folder.name: files_left(folder) for folder in folders}
    # The one thing Arbiter cannot remove: the runtime folder Python's multiprocessing made
    # for the killed worker's main process (tmp/pymp-*, removed at a clean exit), which no
    # sweep may touch, since a live worker's looks the same (docs/deploy.md: a worker's
    # temporary folder is its container's own, emptied when it is recreated).
    runtime = [name for name in left[f"worker-{killed}"] if name.startswith("tmp/pymp-")]
    assert len(runtime) <= 1, left
    left[f"worker-{killed}"] = [name for name in left[f"worker-{killed}"] if name not in runtime]
    assert left == {folder.name: [] for folder in folders}, f"worker {killed} was killed"


def _killed_inside_an_import(project, node: Node, token: str, workers: dict, archive: bytes) -> str:
    """A second import, held inside its work on a pair it writes; the worker running it is
    killed; the job completes once, on the other worker."""
    held, done = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_pair_id, args=(project, "t23d/late-1", held, done))
    holder.start()
    try:
        assert held.wait(30)
        before = _imports_received(workers)
        job = _import(node, token, ["late-1", "late-2"], archive)
        wait_for(
            lambda: _waiting_on_a_lock() or _finished_early(job["id"]),
            JOB_S,
            "the import waits on the held pair",
        )
        received = _imports_received(workers) - before
        assert len(received) == 1, received
        ((task_id, killed),) = received
        workers[killed].kill()
    finally:
        done.set()
        holder.join(30)
    finished = _import_finished(node, token, job["id"])
    assert (finished["status"], finished["created_pairs"]) == ("succeeded", 2), finished
    survivor = next(worker for name, worker in workers.items() if name != killed)
    succeeded = f"{IMPORT_TASK}[{task_id}] succeeded"
    wait_for(lambda: succeeded in survivor.log(), 30, "the other worker's log says it ran it")
    assert ImportJob.objects.get(pk=job["id"]).attempts == 2  # the killed one, then this
    assert Pair.objects.filter(project=project).count() == 5  # each pair written once
    return killed


IMPORT_TASK = "annotation.tasks.import_run"


def _imports_received(workers: dict) -> set[tuple[str, str]]:
    """(task id, worker name) of every import task a worker's log says it received."""
    found = set()
    for name, worker in workers.items():
        for line in worker.log().splitlines():
            if f"{IMPORT_TASK}[" in line and "received" in line:
                found.add((line.split(f"{IMPORT_TASK}[", 1)[1].split("]", 1)[0], name))
    return found
