"""The media server's side of ``annotation.media.bounded``: the process started with
``python -m annotation.media.bounded_child`` (it imports the media code once, then forks a
child per call, up to the workers asked for at once) and the forked child, which sets its
limits and makes the call (docs/operations.md, "Bounded media work"). The calling process's
side, and what both sides share, is ``annotation.media.bounded``."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import logging
import os
import pickle
import pkgutil
import resource
import select
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from annotation.media.bounded import MEMORY_EXIT, BoundedError, out_of_memory
from annotation.media.loudness import sos_kernel

_PR_SET_PDEATHSIG = 1
# Imported by the server once, so that a child starts with them loaded.
_PRELOAD = (
    "annotation.media.services",
    "annotation.media.av_media",
    "annotation.media.glb",
    "annotation.media.glb_render",
    "annotation.imports.media",
    # Imported on first use by the code above: a child would map them inside its limit.
    "PIL.WebPImagePlugin",
)


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
            if out_of_memory(exc):
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
    sos_kernel()  # the loudness meter's filter, loaded on first use
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
                    if "cancel" in request:  # calls whose caller left: never started, or killed
                        dropped = set(request["cancel"])
                        for queued in [r for r in waiting if r["id"] in dropped]:
                            waiting.remove(queued)
                            end = {"id": queued["id"], "status": None, "cpu": 0.0}
                            answer({**end, "signal": signal.SIGKILL, "wall": False})
                        for child in running.values():
                            if child["request"]["id"] in dropped:
                                with contextlib.suppress(ProcessLookupError):
                                    os.kill(child["pid"], signal.SIGKILL)
                        continue
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
    from annotation.media.bounded_child import _serve as serve

    serve(int(sys.argv[1]))
