"""Hostile media through the whole stack, sent as an API user sends them: gunicorn with the
production settings, a real Celery worker and Redis (docs/operations.md, "Bounded media
work"). The tester's 2 KB GLB whose nodes form a DAG is refused within 60 s while another
project's import, started after it, completes; and no import of a hostile file takes the
worker, its pool process and its bounded children together above 500 MB."""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile

import httpx
import psutil
import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token

from annotation.models import Role
from tests.annotation.imports.conftest import image_bytes, png_bomb
from tests.annotation.media.test_glb_hostile import BOMBS
from tests.celery_worker import database_url_for_tests
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.live_gunicorn import LiveGunicorn

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

REFUSED_WITHIN_S = 60
PEAK_LIMIT_BYTES = 500 * 1024 * 1024


def _pair(pair_id: str, kind: str, path_a: str, path_b: str) -> dict:
    return {
        "id": pair_id,
        "task": "t23d" if kind == "model3d" else "t2i",
        "prompt": "Which is better?",
        "response_a": {"model": "model-a", "response_content": [[kind, path_a]]},
        "response_b": {"model": "model-b", "response_content": [[kind, path_b]]},
    }


def _archive(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def _curator_token(slug: str) -> str:
    project = ProjectFactory(slug=slug)
    user = UserFactory(username=f"curator-{slug}")
    MembershipFactory(project=project, user=user, role=Role.CURATOR)
    return Token.objects.create(user=user).key


class _PeakMemory:
    """The largest sum of proportional set sizes (shared pages counted once across the
    processes that share them) of a process and all its descendants, sampled every 20 ms."""

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for process in [self.root, *self.root.children(recursive=True)]:
                try:
                    total += process.memory_full_info().pss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(0.02)

    def __enter__(self) -> _PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def stack(celery_worker_process):
    """A worker on the default queue and gunicorn in front of the same database, broker and
    media folder; every upload goes to the worker (a job), as a large one does."""
    env = {"ARBITER_SYNC_IMPORT_MAX_BYTES": "1"}
    worker = celery_worker_process(queues="imports", concurrency=2, extra_env=env)
    web_env = {
        **env,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "ARBITER_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "ARBITER_RELEASE_ROOT": str(settings.ARBITER_RELEASE_ROOT),
    }
    with LiveGunicorn(database_url=database_url_for_tests(), extra_env=web_env) as server:
        yield server, worker


def _submit(server, token: str, slug: str, pairs: list[dict], files: dict[str, bytes]) -> dict:
    response = httpx.post(
        f"{server.url}/api/v1/projects/{slug}/imports/",
        headers={"Authorization": f"Token {token}"},
        files={
            "file": ("pairs.jsonl", "\n".join(json.dumps(p) for p in pairs).encode()),
            "media_archive": ("media.zip", _archive(files)),
        },
        timeout=30,
    )
    assert response.status_code in (200, 201, 202), response.text
    return response.json()


def _finished(server, token: str, slug: str, job_id: int, *, within_s: float, log) -> dict:
    deadline = time.monotonic() + within_s
    while True:
        job = httpx.get(
            f"{server.url}/api/v1/projects/{slug}/imports/{job_id}/",
            headers={"Authorization": f"Token {token}"},
            timeout=10,
        ).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']}:\n{log()}"
        time.sleep(0.2)


def _messages(job: dict) -> str:
    return " | ".join(error["message"] for error in job.get("errors") or [])


@pytest.mark.timeout(240)
def test_the_dag_glb_is_refused_in_time_and_another_projects_import_completes(stack):
    server, worker = stack
    dag, reason = BOMBS["a DAG 60 levels deep, each node listing the next twice"]
    hostile = dag()
    assert len(hostile) < 4096  # the tester's file was 2 KB
    token = _curator_token("dag")
    other = _curator_token("other")
    started = time.monotonic()
    job = _submit(
        server, token, "dag", [_pair("d1", "model3d", "dag.glb", "dag.glb")], {"dag.glb": hostile}
    )
    # another project's import, started after the hostile one
    images = {"a.png": image_bytes((200, 30, 30)), "b.png": image_bytes((30, 30, 200))}
    later = _submit(server, other, "other", [_pair("i1", "image", "a.png", "b.png")], images)

    refused = _finished(server, token, "dag", job["id"], within_s=REFUSED_WITHIN_S, log=worker.log)
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert refused["status"] == "failed"
    assert reason in _messages(refused)
    done = _finished(server, other, "other", later["id"], within_s=60, log=worker.log)
    assert (done["status"], done["created_pairs"]) == ("succeeded", 1), _messages(done)


@pytest.mark.timeout(300)
def test_no_import_of_a_hostile_file_peaks_above_500_mb(stack):
    server, worker = stack
    hostile = {
        "accessors.glb": BOMBS["12,000,000 vertices without a buffer view"][0](),
        "indices.glb": BOMBS["a few indices over 12,000,000 vertices without a buffer view"][0](),
        "texture.glb": BOMBS["a texture claiming 100,000 x 100,000 pixels"][0](),
        "bomb.png": png_bomb(),
    }
    token = _curator_token("bombs")
    with _PeakMemory(worker.process.pid) as memory:
        for number, (name, data) in enumerate(hostile.items()):
            kind = "image" if name.endswith(".png") else "model3d"
            job = _submit(
                server, token, "bombs", [_pair(f"b{number}", kind, name, name)], {name: data}
            )
            refused = _finished(server, token, "bombs", job["id"], within_s=60, log=worker.log)
            assert refused["status"] == "failed", name
            assert "refused" in _messages(refused), (name, _messages(refused))
    assert 0 < memory.peak < PEAK_LIMIT_BYTES, f"peak {memory.peak / 2**20:.0f} MB"
