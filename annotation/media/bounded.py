"""Media work on an uploaded file, bounded in memory, CPU time and wall time: every parse,
probe, transcode and render of a file runs in a child process of its own, so that a bug in
FFmpeg, Pillow or a parser (an endless loop, a huge allocation, a crash) costs one refusal
with its reason, never a hung or killed worker (docs/operations.md, "Bounded media work").

Starting Python and importing PyAV, Pillow and numpy for each file would cost more than
checking a small image, so each process that does media work starts one *media server*
(``python -m annotation.media.bounded_child``, with ``subprocess``: Celery's pool processes are
daemonic and may not have ``multiprocessing`` children). It imports the media code once,
then forks one child per file, up to ``ARBITER_MEDIA_WORKERS`` at once. Each child:

- dies with the server (``PR_SET_PDEATHSIG``), as the server dies with the process that
  started it, so ``kill -9`` of a worker leaves no process behind;
- has its own limits, set after the fork: address space (``RLIMIT_AS``, the server's own
  size plus the kind's budget; ``MALLOC_ARENA_MAX`` keeps glibc from reserving 64 MB per
  thread), CPU time (``RLIMIT_CPU``, counted from zero in each child) and no core file;
- is killed by the server when the kind's wall-clock limit passes;
- reads its call from, and writes its pickled result to, a folder that the calling process
  removes on every way out; its temporary files go there too.

A child touches neither the database nor Django's ORM: it gets the calling process's
``ARBITER_*`` settings and ``MEDIA_ROOT`` with each call, so a limit changed at run time (or
by a test) applies in the child as it does in the caller.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

KINDS = ("image", "video", "audio", "model3d")
# The exit status of a child whose allocation failed (a MemoryError under RLIMIT_AS).
MEMORY_EXIT = 86
# A server that answers nothing for this long past the wall limit is killed with its children.
_SERVER_GRACE_SECONDS = 10.0
_START_SECONDS = 60.0
_TEMP_PREFIX = "arbiter-media-"


class BoundedError(Exception):
    """The child that worked on a file was stopped; the message says why, in words an
    importer can show after the file's name ("needed more than 400 MB of memory")."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    cpu_seconds: int
    wall_seconds: int
    # False (ARBITER_MEDIA_LIMITS off, for the benchmark): the same children, no rlimits.
    enforce: bool = True


def media_limits(kind: str) -> Limits:
    """The limits of the child that works on a file of ``kind`` (one of ``KINDS``)."""
    from django.conf import settings

    return Limits(
        memory_bytes=settings.ARBITER_MEDIA_MEMORY_BYTES[kind],
        cpu_seconds=settings.ARBITER_MEDIA_CPU_SECONDS[kind],
        wall_seconds=settings.ARBITER_MEDIA_WALL_SECONDS[kind],
        enforce=settings.ARBITER_MEDIA_LIMITS,
    )


def bounded_call(func: Callable[..., Any], /, *args: Any, kind: str, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` in a bounded child; returns its result or raises what it
    raised, or ``BoundedError`` when the child was stopped. ``func`` is a module-level
    function; its arguments and result are pickled (pass paths rather than large bytes)."""
    [outcome] = bounded_map(func, [(args, kwargs)], kind=kind)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def bounded_map(
    func: Callable[..., Any],
    calls: Sequence[tuple[tuple, dict]],
    *,
    kind: str | Sequence[str],
    batch: int = 1,
) -> list[Any]:
    """``func(*args, **kwargs)`` for each ``(args, kwargs)`` of ``calls``, in bounded children,
    up to ``ARBITER_MEDIA_WORKERS`` at once, each under the limits of ``kind`` (one for all,
    or one per call); in order, each outcome is the result, the exception the call raised
    (with the child's traceback as a note) or a ``BoundedError``.

    With ``batch`` > 1 (one ``kind`` only), a child makes up to that many calls in turn, under
    the limits of one: starting a child costs more than checking a small image. When a batch
    hits a limit, each of its calls is made again in a child of its own, so that the refusal
    goes to the file that caused it."""
    from django.conf import settings

    workers = max(1, settings.ARBITER_MEDIA_WORKERS)
    if batch > 1 and isinstance(kind, str) and len(calls) > 1:
        return _batched(func, calls, kind=kind, size=min(batch, -(-len(calls) // workers)))
    with bounded_submit(func, calls, kind=kind) as running:
        return running.outcomes()


def bounded_submit(
    func: Callable[..., Any], calls: Sequence[tuple[tuple, dict]], *, kind: str | Sequence[str]
) -> BoundedBatch:
    """Hands ``calls`` to the media server and returns at once: the children start as cores
    free up, after the calls handed to it before (by this caller or another thread), so that
    a caller hands over the next files while the last ones are still being worked on, and no
    core waits between them. ``BoundedBatch.outcomes`` waits for them: those of
    ``bounded_map``, in the same order. Close the batch (``with``) when done with it."""
    from django.conf import settings

    workers = max(1, settings.ARBITER_MEDIA_WORKERS)
    kinds = [kind] * len(calls) if isinstance(kind, str) else list(kind)
    limits = [media_limits(each) for each in kinds]
    snapshot = _settings_snapshot()
    folder = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{os.getpid()}-"))
    try:
        with _LOCK:
            server = _server()
            ids = server.submit(
                func, calls, limits=limits, folder=folder, snapshot=snapshot, workers=workers
            )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return BoundedBatch(server, ids, folder)


class BoundedBatch:
    """Calls handed to the media server by ``bounded_submit``, running while the caller goes
    on. Closing it (or leaving its ``with``) waits for any still running, since they write
    into its folder, then removes the folder."""

    def __init__(self, server: _Server, ids: list[int], folder: Path):
        self._server = server
        self._ids = ids
        self._folder = folder
        self._ends: list[tuple[dict | BoundedError, Limits]] | None = None
        self._outcomes: list[Any] | None = None

    def outcomes(self) -> list[Any]:
        """Waits for every call; in order, each call's result, the exception it raised or
        the ``BoundedError`` that says why its child was stopped."""
        if self._outcomes is None:
            self._outcomes = [_outcome(end, self._folder, limits) for end, limits in self._wait()]
        return self._outcomes

    def _wait(self) -> list[tuple[dict | BoundedError, Limits]]:
        if self._ends is None:
            self._ends = self._server.collect(self._ids)
        return self._ends

    def close(self) -> None:
        """Left before its outcomes were asked for (an import that failed or was cancelled
        meanwhile), its calls not ended are cancelled: those waiting never start, those
        running are killed. Then it waits for their ends and removes the folder."""
        try:
            if self._ends is None:
                with _LOCK:
                    self._server.cancel(self._ids)
            self._wait()
        finally:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> BoundedBatch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _batched(
    func: Callable[..., Any], calls: Sequence[tuple[tuple, dict]], *, kind: str, size: int
) -> list[Any]:
    chunks = [list(calls[start : start + size]) for start in range(0, len(calls), size)]
    outcomes: list[Any] = []
    for chunk, outcome in zip(
        chunks, bounded_map(call_each, [((func, chunk), {}) for chunk in chunks], kind=kind),
        strict=True,
    ):  # fmt: skip
        if isinstance(outcome, BaseException):  # a limit: found out whose, one call a child
            outcomes.extend(bounded_map(func, chunk, kind=kind) if len(chunk) > 1 else [outcome])
        else:
            outcomes.extend(outcome)
    return outcomes


def call_each(func: Callable[..., Any], calls: list[tuple[tuple, dict]]) -> list[Any]:
    """In a child: ``func`` of each call in turn, each outcome its result or the exception it
    raised; running out of memory ends the whole batch, to be tried again call by call."""
    outcomes: list[Any] = []
    for args, kwargs in calls:
        try:
            outcomes.append(func(*args, **kwargs))
        except Exception as exc:
            if out_of_memory(exc):
                raise MemoryError from exc
            exc.add_note(f"in the media child:\n{traceback.format_exc()}")
            outcomes.append(exc)
    return outcomes


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the memory limit: a ``MemoryError`` that code turned into
    its own error (the original stays its context), or a library that could not be mapped."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MemoryError):
            return True
        if isinstance(current, ImportError) and "failed to map segment" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def bounded_start() -> None:
    """Starts this process's media server now, in a thread, rather than at its first call:
    the first call then waits only for what is left of the start (a Celery pool process of a
    worker that takes imports calls it as it starts)."""

    def start() -> None:
        with _LOCK:
            try:
                _server()
            except (BoundedError, OSError) as exc:  # the first call starts one, or says why
                logger.warning("the media server did not start ahead of use: %s", exc)

    threading.Thread(target=start, name="media-server-start", daemon=True).start()


def bounded_stop() -> None:
    """Stops this process's media server and its children (a new one starts when needed)."""
    global _SERVER
    with _LOCK:
        if _SERVER is not None and _SERVER.owner == os.getpid():
            _SERVER.kill()
        _SERVER = None


def bounded_server_pid() -> int | None:
    """The pid of this process's media server, if one runs."""
    server = _SERVER
    if server is None or server.owner != os.getpid() or server.process.poll() is not None:
        return None
    return server.process.pid


def _settings_snapshot() -> dict[str, Any]:
    from django.conf import settings

    snapshot = {}
    for name in dir(settings):
        if name.startswith("ARBITER_") or name == "MEDIA_ROOT":
            value = getattr(settings, name)
            if isinstance(value, (str, int, float, bool, type(None), dict, list, tuple, Path)):
                snapshot[name] = value
    return snapshot


def _outcome(end: dict | BoundedError, folder: Path, limits: Limits) -> Any:
    """A call's outcome from its end: the result its child wrote, or why there is none."""
    if isinstance(end, BoundedError):
        return end
    result = folder / f"{end['id']}.result"
    if end["status"] == 0 and not end["wall"] and result.exists():
        try:
            with open(result, "rb") as handle:
                _ok, value, records = pickle.load(handle)
        except (OSError, EOFError, pickle.PickleError) as exc:
            return BoundedError(f"its result could not be read back ({exc})")
        for record in records:  # the child's log, in the caller's handlers
            logging.getLogger(record.name).handle(record)
        return value
    return BoundedError(_reason(end, limits))


def _reason(end: dict, limits: Limits) -> str:
    """Why a child ended without a result, as the refusal says it."""
    if end["wall"]:
        return f"took longer than {limits.wall_seconds:,} s"
    sig = end["signal"]
    if limits.enforce and (
        sig == signal.SIGXCPU or (sig == signal.SIGKILL and end["cpu"] >= limits.cpu_seconds)
    ):
        return f"used more than {limits.cpu_seconds:,} s of CPU time"
    if end["status"] == MEMORY_EXIT:
        return f"needed more than {limits.memory_bytes // 1_000_000:,} MB of memory"
    if sig:
        return f"crashed (signal {sig}, {signal.Signals(sig).name})"
    if end["status"]:
        return f"stopped with exit status {end['status']}"
    return "stopped without a result"


# --- the calling process's side ---------------------------------------------------------

_LOCK = threading.Lock()
_SERVER: _Server | None = None


def _server() -> _Server:
    """This process's media server, started (or restarted) when there is none alive."""
    global _SERVER
    if _SERVER is None or _SERVER.owner != os.getpid() or _SERVER.process.poll() is not None:
        if _SERVER is not None and _SERVER.owner == os.getpid():
            _SERVER.kill()
        _sweep_folders()
        _SERVER = _Server()
    return _SERVER


def _sweep_folders() -> None:
    """Removes call folders left by processes that died before they could (``kill -9``)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_TEMP_PREFIX}*"):
        pid = folder.name[len(_TEMP_PREFIX) :].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


class _Spawner:
    """A thread that lives as long as its process and starts the media server:
    ``PR_SET_PDEATHSIG`` fires when the *thread* that started a process ends, so the server
    is started by one that never does (an import's reader thread ends with the import)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="media-server-spawner", daemon=True).start()

    def _loop(self) -> None:
        while True:
            argv, env, answer = self.requests.get()
            try:
                started = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True
                )
                answer.put(started)
            except BaseException as exc:  # handed to the caller, which raises it
                answer.put(exc)

    def popen(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        answer: queue.Queue = queue.Queue()
        self.requests.put((argv, env, answer))
        started = answer.get()
        if isinstance(started, BaseException):
            raise started
        return started


_SPAWNER: _Spawner | None = None


def _spawner() -> _Spawner:
    global _SPAWNER
    if _SPAWNER is None or _SPAWNER.owner != os.getpid():
        _SPAWNER = _Spawner()
    return _SPAWNER


class _Server:
    def __init__(self) -> None:
        self.owner = os.getpid()
        env = {
            **os.environ,
            # One malloc arena per thread would reserve 64 MB of address space each: the
            # memory limit would count reservations, not what the file needs.
            "MALLOC_ARENA_MAX": "2",
            # One thread per child for numpy's BLAS too: the children are the parallelism.
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        argv = [sys.executable, "-m", "annotation.media.bounded_child", str(os.getpid())]
        self.process = _spawner().popen(argv, env)
        self.next_id = 0
        # Calls handed over whose end is not read yet, and ends read but not yet collected
        # (by the thread that waits for them): several batches may be running at once.
        self.pending: dict[int, Limits] = {}
        self.ended: dict[int, tuple[dict | BoundedError, Limits]] = {}
        self.failure: BoundedError | None = None
        self.state = threading.Lock()  # guards the three above and ``reader``
        # One thread reads the server's answers at a time (``reader``); the others wait on
        # ``changed``, told after each answer read, so a thread whose calls have ended returns
        # at once even while the reader waits on a slow call of its own.
        self.reader = False
        self.changed = threading.Condition(self.state)
        # Killed: the answers' pipe is closed then, or by the reader when it returns, never
        # under it. A reader waits on the pipe's number; closed under it, the number could
        # go to the next server's pipe, and the reader would take that server's answers.
        self.killed = False
        ready = self._receive(time.monotonic() + _START_SECONDS)
        if ready != {"ready": True}:
            self.kill()
            raise BoundedError(f"the media server did not start ({ready})")

    def submit(
        self,
        func: Callable[..., Any],
        calls: Sequence[tuple[tuple, dict]],
        *,
        limits: list[Limits],
        folder: Path,
        snapshot: dict[str, Any],
        workers: int,
    ) -> list[int]:
        """Hands ``calls`` over (the caller holds ``_LOCK``); returns their ids."""
        ids = []
        for (args, kwargs), each in zip(calls, limits, strict=True):
            self.next_id += 1
            call_id = self.next_id
            ids.append(call_id)
            with open(folder / f"{call_id}.call", "wb") as handle:
                pickle.dump((func, args, kwargs, snapshot), handle, pickle.HIGHEST_PROTOCOL)
            (folder / str(call_id)).mkdir()
            with self.state:
                if self.failure is not None:
                    self.ended[call_id] = (self.failure, each)
                    continue
                self.pending[call_id] = each
            try:
                self._send(
                    {
                        "id": call_id,
                        "module": func.__module__,
                        "folder": str(folder),
                        "limits": (each.memory_bytes, each.cpu_seconds, each.wall_seconds,
                                   each.enforce),
                        "workers": workers,
                    }
                )  # fmt: skip
            except (OSError, ValueError) as exc:  # ValueError: another thread killed it
                self._fail(BoundedError(f"the media server stopped ({exc})"))
        return ids

    def cancel(self, ids: list[int]) -> None:
        """Asks the server to drop the calls ``ids`` not ended yet (the caller holds
        ``_LOCK``): a waiting one is answered at once, a running one is killed."""
        with self.state:
            live = [call_id for call_id in ids if call_id in self.pending]
        if not live:
            return
        try:
            self._send({"cancel": live})
        except (OSError, ValueError) as exc:  # ValueError: another thread killed it
            self._fail(BoundedError(f"the media server stopped ({exc})"))

    def collect(self, ids: list[int]) -> list[tuple[dict | BoundedError, Limits]]:
        """Waits for the ends of the calls ``ids`` (whichever thread reads them); gives
        them, in order, each with its call's limits."""
        while True:
            with self.state:
                while True:
                    if all(call_id in self.ended for call_id in ids):
                        return [self.ended.pop(call_id) for call_id in ids]
                    if not self.reader:
                        self.reader = True
                        break
                    self.changed.wait()
            try:
                self._read_one()
            finally:
                with self.state:
                    self.reader = False
                    self.changed.notify_all()
                    closing = self.killed
                if closing:
                    self._close_answers()

    def _read_one(self) -> None:
        """Reads the next end the server answers (the caller is the ``reader``)."""
        with self.state:
            walls = [each.wall_seconds for each in self.pending.values()]
        if not walls:
            raise RuntimeError("waiting for calls the media server was never handed")
        try:
            # Each child is killed at the wall limit, so an answer comes at least that
            # often; a server that stays silent longer is stuck and is killed.
            end = self._receive(time.monotonic() + max(walls) + _SERVER_GRACE_SECONDS)
        except (OSError, ValueError, EOFError, pickle.PickleError) as exc:
            self._fail(BoundedError(f"the media server stopped ({exc or type(exc).__name__})"))
            return
        if end is None:
            self._fail(BoundedError("the media server stopped answering and was killed"))
            return
        with self.state:
            self.ended[end["id"]] = (end, self.pending.pop(end["id"]))

    def _fail(self, reason: BoundedError) -> None:
        """Kills the server; every call not ended yet, and any handed over later, gets
        ``reason`` (the next ``_server()`` starts a new one)."""
        self.kill()
        with self.state:
            if self.failure is None:
                self.failure = reason
            for call_id, limits in self.pending.items():
                self.ended[call_id] = (self.failure, limits)
            self.pending.clear()
            self.changed.notify_all()

    def _send(self, message: dict) -> None:
        assert self.process.stdin is not None
        data = pickle.dumps(message)
        self.process.stdin.write(struct.pack("<I", len(data)) + data)
        self.process.stdin.flush()

    def _receive(self, deadline: float) -> Any:
        """The server's next message, or None when it says nothing before ``deadline``."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        data = b""
        while True:
            need = 4 if len(data) < 4 else 4 + struct.unpack("<I", data[:4])[0]
            if len(data) == need and need > 4:
                return pickle.loads(data[4:])
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, need - len(data))
            if not chunk:
                raise EOFError("the media server ended")
            data += chunk

    def kill(self) -> None:
        """Kills the server; its children die with it (their parent-death signal). Its
        answers' pipe is closed now, or by the thread reading it when that returns."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with self.state:
            self.killed = True
            reading = self.reader
        if not reading:
            self._close_answers()

    def _close_answers(self) -> None:
        if self.process.stdout is not None:
            with contextlib.suppress(OSError):
                self.process.stdout.close()
