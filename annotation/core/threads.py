"""Running a generator in a background thread, so that its work overlaps the consumer's: an
import's reading, checking and hashing of a file (Python) with writing it (the database); a
release build's reading of the database with encoding and writing its files."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator

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
