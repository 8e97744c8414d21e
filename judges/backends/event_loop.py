"""One asyncio event loop per process, in a daemon thread, that every HTTP judge's calls run
on: a backend's connections and its bound on calls in flight outlive a batch, so a worker
process reuses its connections from batch to batch and judges several judges at once, while
the calling thread (a Celery task's) writes the answers that are in (docs/judges-runs.md,
"How a run executes").

A process that forks gets a loop of its own on first use (Celery's pool processes); the
worker closes it when a pool process ends (``judges.tasks``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_owner_pid = 0


def _alive() -> bool:
    return _thread is not None and _thread.is_alive() and _owner_pid == os.getpid()


def running_loop() -> asyncio.AbstractEventLoop | None:
    """This process's loop when it runs (None before its first use, after a fork or a stop)."""
    with _lock:
        return _loop if _alive() else None


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's loop, started on first use (again after a fork or a stop)."""
    global _loop, _thread, _owner_pid
    with _lock:
        if _loop is None or not _alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="judge-calls", daemon=True)
            _thread.start()
            _owner_pid = os.getpid()
        return _loop


def on_loop(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedules ``coro`` on this process's loop; its result, or its exception, comes in the
    future (cancelling the future cancels the coroutine)."""
    return on_loop_each([coro])[0]


def on_loop_each(coros: list[Coroutine[Any, Any, T]]) -> list[concurrent.futures.Future[T]]:
    """``on_loop`` for each of ``coros``, in one wake-up of the loop rather than one each (a
    batch starts hundreds of calls at once)."""
    loop = event_loop()
    futures: list[concurrent.futures.Future[T]] = [concurrent.futures.Future() for _ in coros]

    def start() -> None:
        for coro, future in zip(coros, futures, strict=True):
            if future.cancelled():  # before it started
                coro.close()
                continue
            _chain(loop.create_task(coro), future, loop)

    loop.call_soon_threadsafe(start)
    return futures


def _chain(task: asyncio.Task[T], future: concurrent.futures.Future[T], loop) -> None:
    """The task's outcome goes to ``future``; cancelling ``future`` cancels the task."""

    def settle(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            future.cancel()
        elif future.set_running_or_notify_cancel():
            if (exc := task.exception()) is not None:
                future.set_exception(exc)
            else:
                future.set_result(task.result())

    def cancel(future: concurrent.futures.Future[T]) -> None:
        if future.cancelled() and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    task.add_done_callback(settle)
    future.add_done_callback(cancel)


def run_on_loop(coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
    """Runs ``coro`` on this process's loop and waits for it; an exception in the waiting
    thread (a task's soft time limit) cancels it."""
    future = on_loop(coro)
    try:
        return future.result(timeout=timeout)
    except BaseException:
        future.cancel()
        raise


def event_loop_stop(*, timeout: float = 5.0) -> None:
    """Stops this process's loop and its thread (when a worker process ends); callers close
    their clients on it first."""
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop = _thread = None
    if loop is None or thread is None or _owner_pid != os.getpid():
        return
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout)
    if not thread.is_alive():
        loop.close()
