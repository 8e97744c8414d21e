"""Running a generator in a background thread, so that its work overlaps the consumer's: an
import's reading, checking and hashing of a file (Python) with writing it (the database); a
release build's reading of the database with encoding and writing its files. And running
calls in order on a thread of their own (``InOrder``): an import's statements while it
prepares the next batch."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager

from django.db import connections


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()


def in_background(items: Iterator, *, name: str, depth: int = 2) -> Generator:
    """Runs the generator ``items`` in a thread named ``name``, at most ``depth`` items ahead of the
    consumer; its exceptions are raised in the consumer, and it stops when the consumer does.
    The generator is closed in its own thread (its ``finally`` and ``with`` blocks run there),
    then the database connections that thread opened are closed."""
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer
            put(_Raised(exc))
        finally:
            try:
                close = getattr(items, "close", None)
                if close is not None:
                    close()
            finally:
                connections.close_all()  # this thread's own connections only

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


class InOrder:
    """Calls run one after another on a thread of their own, in the order they were given,
    while the caller goes on (an import's statements, written while it prepares the next
    batch); at most ``depth`` wait. The first error a call raises is raised in the caller at
    its next ``submit`` or ``drain``, and the calls after it are dropped. ``close`` waits for
    the call running, drops those waiting and ends the thread."""

    def __init__(self, *, name: str, depth: int = 4):
        self._calls: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            call = self._calls.get()
            try:
                if call is _DONE:
                    return
                if self._error is None and not self._closed:
                    call()
            except BaseException as exc:  # handed to the caller
                self._error = exc
            finally:
                self._calls.task_done()

    def submit(self, call: Callable[[], object]) -> None:
        self._raise_error()
        self._calls.put(call)

    def drain(self) -> None:
        """Waits until every call given so far has run; raises the first one's error."""
        self._calls.join()
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._closed = True
        self._calls.put(_DONE)
        self._thread.join()


# Python hands the GIL to a waiting thread every "switch interval" (5 ms by default). A thread
# that waits on the network a hundred times a second, as an import's statements' thread does
# while it streams COPY data, waits up to that long for the GIL after each wait while the
# threads preparing the next batch hold it, and the database idles meanwhile
# (docs/import-format.md, "Text and images").
QUICK_SWITCH_INTERVAL_S = 0.0002
_switching = threading.Lock()
_quick_blocks = 0
_default_interval = 0.0


@contextmanager
def quick_thread_switches() -> Iterator[None]:
    """The process's thread switch interval at ``QUICK_SWITCH_INTERVAL_S`` for the block (it is
    the whole process's: blocks on several threads share it, and the last one to end puts
    back the interval found by the first)."""
    global _quick_blocks, _default_interval
    with _switching:
        if _quick_blocks == 0:
            _default_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(QUICK_SWITCH_INTERVAL_S, _default_interval))
        _quick_blocks += 1
    try:
        yield
    finally:
        with _switching:
            _quick_blocks -= 1
            if _quick_blocks == 0:
                sys.setswitchinterval(_default_interval)
