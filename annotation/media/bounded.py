"""Media work on an uploaded file, bounded in memory, CPU time and wall time: every parse,
probe, transcode and render of a file runs in a child process of its own, so that a bug in
FFmpeg, Pillow or a parser (an endless loop, a huge allocation, a crash) costs one refusal
with its reason, never a hung or killed worker (docs/operations.md, "Bounded media work").

Starting Python and importing PyAV, Pillow and numpy for each file would cost more than
checking a small image, so each process that does media work starts one *media server*
(``python -m annotation.media.bounded``, with ``subprocess``: Celery's pool processes are
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
import ctypes
import gc
import importlib
import logging
import os
import pickle
import pkgutil
import queue
import resource
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
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

KINDS = ("image", "video", "audio", "model3d")
# The exit status of a child whose allocation failed (a MemoryError under RLIMIT_AS).
MEMORY_EXIT = 86
_PR_SET_PDEATHSIG = 1
# A server that answers nothing for this long past the wall limit is killed with its children.
_SERVER_GRACE_SECONDS = 10.0
_START_SECONDS = 60.0
# Imported by the server once, so that a child starts with them loaded.
_PRELOAD = (
    "annotation.media.services",
    "annotation.media.av_media",
    "annotation.media.glb",
    "annotation.media.glb_render",
    "annotation.imports.media",
    # Imported on first use by the code above: a child would map them inside its limit.
    "scipy.signal",
    "PIL.WebPImagePlugin",
)
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
    kinds = [kind] * len(calls) if isinstance(kind, str) else list(kind)
    limits = [media_limits(each) for each in kinds]
    snapshot = _settings_snapshot()
    with _LOCK:
        folder = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{os.getpid()}-"))
        try:
            return _server().run(
                func, calls, limits=limits, folder=folder, snapshot=snapshot, workers=workers
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)


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
            if _out_of_memory(exc):
                raise MemoryError from exc
            exc.add_note(f"in the media child:\n{traceback.format_exc()}")
            outcomes.append(exc)
    return outcomes


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
        argv = [sys.executable, "-m", "annotation.media.bounded", str(os.getpid())]
        self.process = _spawner().popen(argv, env)
        self.next_id = 0
        ready = self._receive(time.monotonic() + _START_SECONDS)
        if ready != {"ready": True}:
            self.kill()
            raise BoundedError(f"the media server did not start ({ready})")

    def run(
        self,
        func: Callable[..., Any],
        calls: Sequence[tuple[tuple, dict]],
        *,
        limits: list[Limits],
        folder: Path,
        snapshot: dict[str, Any],
        workers: int,
    ) -> list[Any]:
        outcomes: dict[int, Any] = {}
        ids = []
        by_id = {}
        for (args, kwargs), each in zip(calls, limits, strict=True):
            self.next_id += 1
            ids.append(self.next_id)
            by_id[self.next_id] = each
            call_path = folder / f"{self.next_id}.call"
            with open(call_path, "wb") as handle:
                pickle.dump((func, args, kwargs, snapshot), handle, pickle.HIGHEST_PROTOCOL)
            (folder / str(self.next_id)).mkdir()
            self._send(
                {
                    "id": self.next_id,
                    "module": func.__module__,
                    "folder": str(folder),
                    "limits": (each.memory_bytes, each.cpu_seconds, each.wall_seconds,
                               each.enforce),
                    "workers": workers,
                }
            )  # fmt: skip
        try:
            while len(outcomes) < len(ids):
                # Each child is killed at the wall limit, so an answer comes at least that
                # often; a server that stays silent longer is stuck and is killed.
                wall = max(by_id[i].wall_seconds for i in ids if i not in outcomes)
                end = self._receive(time.monotonic() + wall + _SERVER_GRACE_SECONDS)
                if end is None:
                    raise BoundedError("the media server stopped answering and was killed")
                outcomes[end["id"]] = self._outcome(end, folder, by_id[end["id"]])
        except (BoundedError, OSError, EOFError, pickle.PickleError) as exc:
            self.kill()
            reason = exc if isinstance(exc, BoundedError) else BoundedError(
                f"the media server stopped ({exc or type(exc).__name__})"
            )  # fmt: skip
            for call_id in ids:
                outcomes.setdefault(call_id, reason)
        return [outcomes[call_id] for call_id in ids]

    def _outcome(self, end: dict, folder: Path, limits: Limits) -> Any:
        result = folder / f"{end['id']}.result"
        if end["status"] == 0 and not end["wall"] and result.exists():
            with open(result, "rb") as handle:
                _ok, value, records = pickle.load(handle)
            for record in records:  # the child's log, in the caller's handlers
                logging.getLogger(record.name).handle(record)
            return value
        return BoundedError(_reason(end, limits))

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
        """Kills the server; its children die with it (their parent-death signal)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


# --- the media server -------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Asks the kernel for SIGKILL when the parent dies; exits at once if it already has
    (it died between the fork and this call: the signal would never come)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(70)
    if os.getppid() != parent:
        os._exit(71)


def _address_space() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(request: dict, server: int) -> None:
    """In the forked child: limits, then the call; never returns."""
    try:
        _die_with_parent(server)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGXCPU, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        memory, cpu, _wall, enforce = request["limits"]
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if enforce:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            limit = _address_space() + memory
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        folder = Path(request["folder"])
        own = str(folder / str(request["id"]))
        os.environ["TMPDIR"] = tempfile.tempdir = own
        os.chdir(own)
        with open(folder / f"{request['id']}.call", "rb") as handle:
            func, args, kwargs = _load_call(handle)
        log = _LogCollector()
        logging.getLogger().handlers = [log]
        try:
            outcome: tuple[bool, Any, list] = (True, func(*args, **kwargs), log.records)
        except MemoryError:
            os._exit(MEMORY_EXIT)
        except Exception as exc:
            if _out_of_memory(exc):
                os._exit(MEMORY_EXIT)
            exc.add_note(f"in the media child:\n{traceback.format_exc()}")
            outcome = (False, exc, log.records)
        partial = folder / f"{request['id']}.partial"
        try:
            data = pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            os._exit(MEMORY_EXIT)
        except Exception as exc:
            failure = BoundedError(f"its result could not be returned: {exc}")
            data = pickle.dumps((False, failure, log.records))
        with open(partial, "wb") as handle:
            handle.write(data)
        os.rename(partial, folder / f"{request['id']}.result")
        os._exit(0)
    except MemoryError:
        os._exit(MEMORY_EXIT)
    except BaseException:
        traceback.print_exc()
        os._exit(1)


def _out_of_memory(exc: BaseException) -> bool:
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


class _LogCollector(logging.Handler):
    """Keeps the child's log records, made picklable, for the caller to log."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        self.records.append(record)


def _load_call(handle: Any) -> tuple[Callable[..., Any], tuple, dict]:
    from django.conf import settings

    func, args, kwargs, snapshot = pickle.load(handle)
    for name, value in snapshot.items():
        setattr(settings, name, value)
    return func, args, kwargs


def _serve(parent: int) -> None:
    """The server's loop: reads calls on stdin, forks a child for each, up to the workers
    asked for at once, kills those past their wall limit, answers each end on stdout."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the media code prints goes to stderr, not into the answers
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the worker, which stops us
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    for module in _PRELOAD:
        importlib.import_module(module)
    from PIL import Image

    Image.init()  # every format plugin, not only the five Pillow loads first
    import av

    # PyAV loads the module of a stream's type when it first meets one (subtitles, data).
    for found in pkgutil.walk_packages(av.__path__, "av."):
        with contextlib.suppress(Exception):
            importlib.import_module(found.name)

    def answer(message: dict) -> None:
        data = pickle.dumps(message)
        answers.write(struct.pack("<I", len(data)) + data)
        answers.flush()

    # The loaded modules' objects move to a generation the collector never visits, so a
    # child does not copy every page they lie on by walking them.
    gc.collect()
    gc.freeze()
    answer({"ready": True})
    me = os.getpid()
    stdin = sys.stdin.buffer.fileno()
    buffer = b""
    waiting: deque[dict] = deque()
    running: dict[int, dict] = {}  # pidfd -> {"pid", "request", "deadline", "wall"}
    open_input = True
    while open_input or running:
        now = time.monotonic()
        for child in running.values():
            if not child["wall"] and now >= child["deadline"]:
                child["wall"] = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child["pid"], signal.SIGKILL)
        deadlines = [c["deadline"] for c in running.values() if not c["wall"]]
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        readable = select.select(([stdin] if open_input else []) + list(running), [], [], timeout)
        for fd in readable[0]:
            if fd == stdin:
                chunk = os.read(stdin, 1 << 16)
                if not chunk:
                    open_input = False  # the caller is gone: finish nothing, kill all
                    for child in running.values():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(child["pid"], signal.SIGKILL)
                    waiting.clear()
                    continue
                buffer += chunk
                while len(buffer) >= 4:
                    size = struct.unpack("<I", buffer[:4])[0]
                    if len(buffer) < 4 + size:
                        break
                    request = pickle.loads(buffer[4 : 4 + size])
                    buffer = buffer[4 + size :]
                    # Loaded once here rather than in every child; a module that cannot be
                    # imported fails in the child, which reports it.
                    with contextlib.suppress(Exception):
                        importlib.import_module(request["module"])
                    waiting.append(request)
                continue
            child = running.pop(fd)
            _pid, status, usage = os.wait4(child["pid"], 0)
            os.close(fd)
            if open_input:
                answer(
                    {
                        "id": child["request"]["id"],
                        "status": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status)
                        else None,
                        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
                        "cpu": usage.ru_utime + usage.ru_stime,
                        "wall": child["wall"],
                    }
                )  # fmt: skip
        while waiting and len(running) < waiting[0]["workers"]:
            request = waiting.popleft()
            pid = os.fork()
            if pid == 0:
                os.close(stdin)
                answers.close()
                _child(request, me)
            running[os.pidfd_open(pid)] = {
                "pid": pid,
                "request": request,
                "deadline": time.monotonic() + request["limits"][2],
                "wall": False,
            }


if __name__ == "__main__":
    # Run as the importable module, not as ``__main__``: the classes a child pickles
    # (``BoundedError``) must be the ones the caller unpickles.
    from annotation.media.bounded import _serve as serve

    serve(int(sys.argv[1]))
