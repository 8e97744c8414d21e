"""Media work in bounded children (annotation.media.bounded): each limit hit is a refusal that
names it, a crash is one too, the children die with the process that asked, and an import's
files really are checked there. Real processes throughout: the functions below run in the
children, which import this module by name."""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import pickle
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from PIL import Image

from annotation.imports.errors import ImportFailed
from annotation.media.bounded import (
    BoundedError,
    bounded_call,
    bounded_map,
    bounded_server_pid,
    bounded_stop,
    bounded_submit,
)
from annotation.models import Media
from tests.annotation.media.conftest import audio_write, glb_bytes, video_write
from tests.annotation.media.test_import_av import import_media, media_pair

pytestmark = pytest.mark.django_db


# Run in the children -------------------------------------------------------------------


def child_facts() -> dict:
    return {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "core": resource.getrlimit(resource.RLIMIT_CORE),
        "cpu": resource.getrlimit(resource.RLIMIT_CPU),
        "memory": resource.getrlimit(resource.RLIMIT_AS),
        "tmp": tempfile.gettempdir(),
        "arena": os.environ.get("MALLOC_ARENA_MAX"),
    }


def allocate(megabytes: int) -> int:
    block = bytearray(megabytes * 1_000_000)
    return len(block)


def spin() -> None:
    while True:
        pass


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def segfault() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def raise_type_error() -> None:
    raise TypeError("list indices must be integers")


def hide_memory_error() -> None:
    try:
        bytearray(10**12)
    except MemoryError:
        raise ValueError("corrupt: MemoryError") from None


def write_temporary() -> str:
    handle, name = tempfile.mkstemp()
    os.write(handle, b"left behind?")
    os.close(handle)
    return name


def timed_sleep(seconds: float) -> tuple[int, float, float]:
    start = time.monotonic()
    time.sleep(seconds)
    return os.getpid(), start, time.monotonic()


def sleep_with_pid_file(folder: str) -> None:
    Path(folder, str(os.getpid())).write_text("")
    time.sleep(300)


# Limits ------------------------------------------------------------------------------------


def budget(settings, kind: str, memory: int) -> None:
    settings.ARBITER_MEDIA_MEMORY_BYTES = {**settings.ARBITER_MEDIA_MEMORY_BYTES, kind: memory}


@pytest.fixture
def tight(settings):
    """Small limits for images, so that each test hits one quickly."""
    budget(settings, "image", 200_000_000)
    settings.ARBITER_MEDIA_CPU_SECONDS = {**settings.ARBITER_MEDIA_CPU_SECONDS, "image": 1}
    settings.ARBITER_MEDIA_WALL_SECONDS = {**settings.ARBITER_MEDIA_WALL_SECONDS, "image": 20}
    return settings


def test_a_child_runs_under_its_limits_in_its_own_process(tight):
    facts = bounded_call(child_facts, kind="image")
    assert facts["pid"] != os.getpid()
    assert facts["parent"] == bounded_server_pid()
    assert facts["core"] == (0, 0)
    assert facts["cpu"] == (1, 2)
    assert facts["memory"][0] == facts["memory"][1] < 2**40
    assert facts["arena"] == "2"
    assert Path(facts["tmp"]).is_relative_to(tempfile.gettempdir())
    assert not Path(facts["tmp"]).exists()  # the call's folder went with the call


def test_a_child_that_allocates_past_the_memory_limit_is_refused_for_memory(tight):
    assert bounded_call(allocate, 50, kind="image") == 50_000_000
    with pytest.raises(BoundedError, match=r"^needed more than 200 MB of memory$"):
        bounded_call(allocate, 400, kind="image")


def test_a_memory_error_that_code_turned_into_its_own_error_is_still_refused_for_memory(tight):
    with pytest.raises(BoundedError, match=r"^needed more than 200 MB of memory$"):
        bounded_call(hide_memory_error, kind="image")


def test_a_child_that_spins_is_stopped_at_the_cpu_limit(tight):
    started = time.monotonic()
    with pytest.raises(BoundedError, match=r"^used more than 1 s of CPU time$"):
        bounded_call(spin, kind="image")
    assert time.monotonic() - started < 60  # CPU time: on a busy machine, more wall time


def test_a_child_that_sleeps_is_killed_at_the_wall_limit(tight):
    tight.ARBITER_MEDIA_WALL_SECONDS = {**tight.ARBITER_MEDIA_WALL_SECONDS, "image": 1}
    started = time.monotonic()
    with pytest.raises(BoundedError, match=r"^took longer than 1 s$"):
        bounded_call(sleep, 60, kind="image")
    assert time.monotonic() - started < 5


def test_a_child_that_crashes_is_refused_with_its_signal_and_leaves_no_core(tight):
    with pytest.raises(BoundedError, match=r"^crashed \(signal 11, SIGSEGV\)$"):
        bounded_call(segfault, kind="image")
    # The next call gets a working server and child.
    assert bounded_call(allocate, 1, kind="image") == 1_000_000


def test_an_error_in_the_child_comes_back_as_itself_with_the_childs_traceback(tight):
    with pytest.raises(TypeError, match="list indices") as raised:
        bounded_call(raise_type_error, kind="image")
    assert "in the media child" in raised.value.__notes__[0]
    assert "raise_type_error" in raised.value.__notes__[0]


def test_temporary_files_of_a_child_are_removed_with_its_call(tight):
    name = bounded_call(write_temporary, kind="image")
    assert not Path(name).exists()


def test_limits_off_runs_the_same_children_without_rlimits(tight):
    tight.ARBITER_MEDIA_LIMITS = False
    facts = bounded_call(child_facts, kind="image")
    assert facts["memory"] == facts["cpu"] == (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    assert facts["core"] == (0, 0)
    assert bounded_call(allocate, 400, kind="image") == 400_000_000


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_files_are_checked_up_to_the_worker_count_at_once(tight, workers):
    tight.ARBITER_MEDIA_WORKERS = workers
    runs = bounded_map(timed_sleep, [((0.4,), {})] * 6, kind="image")
    assert len({pid for pid, _, _ in runs}) == 6  # one child per call
    moments = sorted({start for _, start, _ in runs})
    at_once = max(sum(1 for _, s, e in runs if s <= moment < e) for moment in moments)
    assert at_once == workers


def pid_or_allocate(megabytes: int) -> int:
    bytearray(megabytes * 1_000_000)
    return os.getpid()


def test_a_batch_shares_a_child_and_a_limit_hit_is_pinned_on_its_own_file(tight):
    tight.ARBITER_MEDIA_WORKERS = 2
    calls = [((1,), {})] * 8
    pids = bounded_map(pid_or_allocate, calls, kind="image", batch=16)
    assert len(set(pids)) == 2  # 8 calls, 2 workers: two children of 4 calls each
    calls[5] = ((400,), {})
    outcomes = bounded_map(pid_or_allocate, calls, kind="image", batch=16)
    assert [type(o) for o in outcomes] == [int] * 5 + [BoundedError] + [int] * 2
    assert str(outcomes[5]) == "needed more than 200 MB of memory"
    assert len(set(outcomes[:4])) == 1  # the first batch went through whole
    assert len(set(outcomes[4:5] + outcomes[6:])) == 3  # the second, one call a child


def test_a_dead_server_is_replaced_and_its_calls_refused(tight):
    bounded_call(allocate, 1, kind="image")
    server = bounded_server_pid()
    assert server is not None
    os.kill(server, signal.SIGKILL)
    psutil.Process(server).wait(5)
    assert bounded_call(allocate, 1, kind="image") == 1_000_000
    assert bounded_server_pid() not in (None, server)


# Streaming: calls handed over while others run -------------------------------------------


def outcome_of(name: str) -> object:
    """In a child: what the call named ``name`` does (the middle of a batch that goes wrong)."""
    if name == "crash":
        segfault()
    if name == "raise":
        raise_type_error()
    if name == "spin":
        spin()
    return name


def test_a_batch_handed_over_starts_as_soon_as_a_core_frees_not_when_the_last_ends(tight):
    """The next batch's calls start while the slowest call of the one before still runs, so
    no core waits for it; each batch's outcomes come in the order of its calls."""
    tight.ARBITER_MEDIA_WORKERS = 2
    with bounded_submit(timed_sleep, [((2.0,), {}), ((0.1,), {})], kind="image") as first:
        with bounded_submit(timed_sleep, [((0.3,), {}), ((0.1,), {})], kind="image") as second:
            later = second.outcomes()
        slow, fast = first.outcomes()
    assert slow[2] - slow[1] >= 2.0 > fast[2] - fast[1]  # in the order of the calls
    assert later[0][2] - later[0][1] >= 0.3 > later[1][2] - later[1][1]
    assert all(start < slow[2] for _, start, _ in later)  # began before the slow one ended
    assert len({pid for pid, _, _ in [slow, fast, *later]}) == 4  # one child per call
    # At no moment more children than workers.
    runs = [slow, fast, *later]
    assert max(sum(1 for _, s, e in runs if s <= moment < e) for _, moment, _ in runs) <= 2


def test_outcomes_come_back_in_order_whatever_order_the_calls_end_in(tight):
    tight.ARBITER_MEDIA_WORKERS = 3
    calls = [((seconds,), {}) for seconds in (0.6, 0.4, 0.2, 0.0, 0.3)]
    runs = bounded_map(timed_sleep, calls, kind="image")
    assert [round(end - start, 1) for _, start, end in runs] == [0.6, 0.4, 0.2, 0.0, 0.3]
    ends = [end for _, _, end in runs]
    assert ends != sorted(ends)  # they did end in another order


def test_a_crash_an_error_and_a_limit_in_a_batch_are_each_its_own_calls_refusal(tight):
    """Calls that fail in the middle of a batch, while another batch runs beside it: each
    outcome is the one that call earned, the others' results are whole."""
    tight.ARBITER_MEDIA_WORKERS = 2
    names = ["a", "crash", "b", "raise", "spin", "c"]
    with bounded_submit(outcome_of, [((name,), {}) for name in names], kind="image") as mixed:
        with bounded_submit(timed_sleep, [((0.1,), {})] * 3, kind="image") as beside:
            # Collected first: the reader keeps the other batch's ends for it meanwhile.
            assert len(beside.outcomes()) == 3
        outcomes = mixed.outcomes()
    assert [outcomes[0], outcomes[2], outcomes[5]] == ["a", "b", "c"]
    assert isinstance(outcomes[1], BoundedError)
    assert str(outcomes[1]) == "crashed (signal 11, SIGSEGV)"
    assert isinstance(outcomes[3], TypeError)
    assert "in the media child" in outcomes[3].__notes__[0]
    assert isinstance(outcomes[4], BoundedError)
    assert str(outcomes[4]) == "used more than 1 s of CPU time"


def test_batches_of_several_threads_run_side_by_side_each_getting_its_own(tight):
    import threading

    tight.ARBITER_MEDIA_WORKERS = 2
    got: dict[int, list] = {}

    def work(n: int) -> None:
        names = [f"{n}-{i}" for i in range(4)]
        with bounded_submit(outcome_of, [((name,), {}) for name in names], kind="image") as b:
            got[n] = b.outcomes()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert got == {n: [f"{n}-{i}" for i in range(4)] for n in range(3)}


def test_a_server_killed_with_two_batches_running_refuses_the_calls_of_both(tight):
    tight.ARBITER_MEDIA_WORKERS = 1
    with (
        bounded_submit(sleep, [((30,), {})] * 2, kind="image") as first,
        bounded_submit(sleep, [((30,), {})], kind="image") as second,
    ):
        server = bounded_server_pid()
        assert server is not None
        os.kill(server, signal.SIGKILL)
        refused = first.outcomes() + second.outcomes()
    assert [type(each) for each in refused] == [BoundedError] * 3
    assert all(str(each).startswith("the media server stopped") for each in refused)
    assert bounded_call(allocate, 1, kind="image") == 1_000_000  # a new server


def test_kill_9_of_the_calling_process_leaves_no_child(tmp_path):
    """The caller is killed mid-call, as the OOM killer or an operator kills a worker: its
    media server and every child it forked die too."""
    script = textwrap.dedent(
        f"""
        import django
        django.setup()
        from annotation.media.bounded import bounded_map
        from tests.annotation.media.test_bounded import sleep_with_pid_file
        bounded_map(sleep_with_pid_file, [(({str(tmp_path)!r},), {{}})] * 2, kind="image")
        """
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    caller = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert caller.poll() is None, "the calling process ended before its children ran"
            assert time.monotonic() < deadline, "the children never started"
            time.sleep(0.1)
        children = [psutil.Process(int(p.name)) for p in tmp_path.iterdir()]
        server = psutil.Process(children[0].ppid())
        assert server.ppid() == caller.pid
        caller.kill()
        caller.wait()
        _gone, alive = psutil.wait_procs([server, *children], timeout=10)
        still = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert still == []
    finally:
        caller.kill()


# Imports go through the children -----------------------------------------------------------


def png(colour: tuple[int, int, int]) -> bytes:
    """A small file whose pixels take 12 MB once decoded."""
    out = io.BytesIO()
    Image.new("RGB", (2000, 2000), colour).save(out, "PNG")
    return out.getvalue()


def starved(settings, kind: str) -> None:
    """A memory budget of 1 MB for ``kind``: checked in a child, any such file is refused."""
    budget(settings, kind, 1_000_000)


@pytest.mark.parametrize("kind", ["image", "video", "audio", "model3d"])
def test_each_kind_of_file_of_an_import_is_checked_in_a_bounded_child(
    project, tmp_path, settings, kind
):
    writers = {
        "image": lambda p, n: p.write_bytes(png((n * 40, 0, 0))),
        "video": lambda p, n: video_write(p, frames=4 + n),
        "audio": lambda p, n: audio_write(p, seconds=10 + n),
        "model3d": lambda p, n: p.write_bytes(glb_bytes(generator=f"g{n}")),
    }
    suffix = {"image": "png", "video": "mp4", "audio": "wav", "model3d": "glb"}[kind]
    names = [f"{n}.{suffix}" for n in range(3)]
    for n, name in enumerate(names):
        writers[kind](tmp_path / name, n)
    # One pair (a single file checked on its own) and two (a window checked in parallel).
    for pairs in ([media_pair("p0", kind, names[0], names[0])],
                  [media_pair("p1", kind, names[1], names[2]),
                   media_pair("p2", kind, names[2], names[1])]):  # fmt: skip
        starved(settings, kind)
        with pytest.raises(ImportFailed) as refused:
            import_media(project, tmp_path, pairs)
        issue = refused.value.issues[0]
        # FFmpeg's x264 may not check an allocation the limit refused and crash instead: the
        # file is refused all the same, with that reason.
        reasons = ("refused: needed more than 1 MB of memory", "refused: crashed (signal 11")
        assert any(reason in issue.message for reason in reasons), issue.message
        assert f"{kind} '" in issue.message
        budget(settings, kind, 400_000_000)
        import_media(project, tmp_path, pairs)
    assert Media.objects.filter(kind="image" if kind == "image" else kind).count() == 3


def test_the_served_copy_of_a_stored_image_is_made_in_a_bounded_child(project, settings):
    from annotation.media.services import MediaError, media_strip_metadata

    data = png((1, 2, 3))
    media = Media.objects.create(
        sha256=__import__("hashlib").sha256(data).hexdigest(), format="PNG", width=8,
        height=8, size_bytes=len(data),
    )  # fmt: skip
    path = Path(settings.MEDIA_ROOT) / media.relative_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    starved(settings, "image")
    with pytest.raises(MediaError, match="needed more than 1 MB of memory"):
        media_strip_metadata(media=media)
    assert media.served_sha256 is None  # nothing of it is served
    budget(settings, "image", 400_000_000)
    media_strip_metadata(media=media)
    assert media.served_sha256 is not None


def teardown_module() -> None:
    bounded_stop()


def test_a_judge_decodes_a_stored_video_in_a_bounded_child(project, tmp_path, settings):
    from annotation.media.judge_images import MediaUnavailable
    from annotation.media.judge_parts import video_frames

    video_write(tmp_path / "a.mp4", frames=8)
    import_media(project, tmp_path, [media_pair("v", "video", "a.mp4", "a.mp4")])
    media = Media.objects.get(kind="video")
    assert len(video_frames(media, count=2, max_side=64)) == 2
    starved(settings, "video")
    # Starved, FFmpeg fails to allocate (ENOMEM) or to start a thread (EAGAIN), in the child.
    with pytest.raises(MediaUnavailable) as refused:
        video_frames(media, count=2, max_side=64)
    reasons = ("needed more than 1 MB of memory", "Resource temporarily unavailable",
               "Cannot allocate memory")  # fmt: skip
    assert any(reason in str(refused.value) for reason in reasons), refused.value
    assert "in the media child" in "".join(getattr(refused.value, "__notes__", [])) or (
        "could not be decoded for the judge" in str(refused.value)
    )


# A real Celery worker --------------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_celery_pool_process_killed_with_9_takes_its_media_server_along(
    celery_worker_process, settings, tmp_path
):
    """An import in a real worker checks its image in a bounded child of the pool process's
    media server; ``kill -9`` of that pool process (the OOM killer's way) leaves no server."""
    import zipfile

    from annotation.imports.services import import_job_submit
    from tests.annotation.imports.conftest import upload, write_jsonl
    from tests.factories import ProjectFactory

    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    worker = celery_worker_process(queues="imports", concurrency=1)
    archive = tmp_path / "media.zip"
    (tmp_path / "a.png").write_bytes(png((9, 9, 9)))
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(tmp_path / "a.png", "a.png")
    pairs = write_jsonl(tmp_path / "p.jsonl", [media_pair("i1", "image", "a.png", "a.png")])
    job = import_job_submit(
        project=ProjectFactory(slug="bounded-worker"), user=None,
        upload=upload("p.jsonl", pairs.read_bytes()),
        archive=upload("media.zip", archive.read_bytes()),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while job.status not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, "the import did not finish"
        time.sleep(0.25)
        job.refresh_from_db()
    assert job.status == "succeeded", job.errors
    descendants = psutil.Process(worker.process.pid).children(recursive=True)
    servers = [p for p in descendants if "annotation.media.bounded_child" in " ".join(p.cmdline())]
    assert len(servers) == 1
    pool_process = psutil.Process(servers[0].ppid())
    assert pool_process.pid != worker.process.pid
    pool_process.kill()
    _gone, alive = psutil.wait_procs(servers, timeout=10)
    assert [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_worker_that_takes_imports_starts_a_media_server_in_each_pool_process(
    celery_worker_process,
):
    """As its pool processes start, before any import, so that no import waits for one; a
    worker of other queues starts none."""

    def servers(worker) -> list[psutil.Process]:
        found = []
        for process in psutil.Process(worker.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "annotation.media.bounded_child" in " ".join(process.cmdline()):
                    found.append(process)
        return found

    importer = celery_worker_process(queues="imports", concurrency=2)
    other = celery_worker_process(queues="releases", concurrency=1)
    deadline = time.monotonic() + 60
    while len(servers(importer)) < 2:
        assert time.monotonic() < deadline, "no media server started"
        time.sleep(0.2)
    pool = {process.pid for process in psutil.Process(importer.process.pid).children()}
    assert {server.ppid() for server in servers(importer)} == pool
    assert servers(other) == []


def test_a_finished_call_is_not_held_behind_another_threads_slow_one(tight):
    """One thread waits on a slow call (a hostile file that runs to its wall limit) and reads
    the server's answers meanwhile; another thread's quick call, once ended, returns at once
    rather than when the reader next hears from the server."""
    tight.ARBITER_MEDIA_WORKERS = 2
    with bounded_submit(sleep, [((8.0,), {})], kind="image") as slow:
        waiter = threading.Thread(target=slow.outcomes)
        waiter.start()
        time.sleep(1.0)  # the waiter is the reader now, waiting on the slow call
        started = time.monotonic()
        assert bounded_map(sleep, [((0.0,), {})], kind="image") == [None]
        took = time.monotonic() - started
        waiter.join()
    assert took < 3.0, f"a call of 0 s took {took:.1f} s"


def test_a_batch_left_before_its_outcomes_cancels_its_calls(tight):
    """An import that fails or is cancelled leaves the windows it handed over: their calls
    are dropped (waiting ones never start, running ones are killed), not run to their wall
    limit; the server goes on serving."""
    tight.ARBITER_MEDIA_WORKERS = 1
    started = time.monotonic()
    with bounded_submit(sleep, [((20.0,), {}), ((20.0,), {}), ((20.0,), {})], kind="image"):
        time.sleep(1.0)  # the first runs, the others wait
    assert time.monotonic() - started < 5.0
    assert bounded_map(sleep, [((0.0,), {})], kind="image") == [None]


def test_a_killed_servers_pipe_is_not_closed_under_the_thread_reading_it(tight, monkeypatch):
    """A thread waits on the server's answers, by the pipe's number, when the server is
    killed (by another thread whose send failed, say). The pipe stays open until that reader
    has seen its end, so its number cannot go to the next pipe opened (the next server's)
    and the reader cannot take that pipe's bytes for its server's answers."""
    from annotation.media import bounded

    outcomes: list = []
    errors: list[BaseException] = []

    def wait(batch) -> None:
        try:
            outcomes.extend(batch.outcomes())
        except BaseException as exc:
            errors.append(exc)

    stranger = pickle.dumps({"id": 10**9, "status": 0, "signal": 0, "cpu": 0.0})
    pipes: list[tuple[int, int]] = []
    with bounded_submit(sleep, [((30.0,), {})], kind="image") as slow:
        server = bounded._SERVER
        number = server.process.stdout.fileno()
        waiter = threading.Thread(target=wait, args=(slow,))
        waiter.start()
        time.sleep(1.0)  # the waiter reads the pipe now
        # The kill's signal comes last, so that pipes opened meanwhile take free numbers
        # while the server is still alive (its input held open, it waits on its call).
        held = os.dup(server.process.stdin.fileno())
        with monkeypatch.context() as later:
            later.setattr(server.process, "kill", lambda: None)
            later.setattr(server.process, "wait", lambda *args, **kwargs: 0)
            server.kill()
        try:
            for _ in range(16):  # the lowest free numbers, each with a stranger's answer
                pipes.append(os.pipe())
                os.write(pipes[-1][1], struct.pack("<I", len(stranger)) + stranger)
            os.kill(server.process.pid, signal.SIGKILL)
            waiter.join(10)
        finally:
            os.close(held)
            for pair in pipes:
                os.close(pair[0])
                os.close(pair[1])
            server.process.wait()
    assert not waiter.is_alive()
    assert errors == []
    assert isinstance(outcomes[0], BoundedError)
    assert all(number not in pair for pair in pipes)
    assert server.process.stdout.closed  # by the reader, once it had seen the end
    assert bounded_map(sleep, [((0.0,), {})], kind="image") == [None]  # a new server
