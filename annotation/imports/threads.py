"""Running a generator in a background thread, so that reading, checking and hashing a file
(Python) overlaps with writing it (the database)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()


def in_background(items: Iterator, *, depth: int = 2) -> Iterator:
    """Runs the generator ``items`` in a thread, at most ``depth`` items ahead of the
    consumer; its exceptions are raised in the consumer, and it stops when the consumer does."""
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

    thread = threading.Thread(target=work, name="import-reader", daemon=True)
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
