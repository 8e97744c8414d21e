"""An import's statements on a thread of their own (annotation/imports/writer.py,
``BulkWriter.in_order``; docs/import-format.md, "Text and images"): rows encoded by the
caller, sent in order by the statements' thread in the caller's transaction, the first error
raised in the caller, and nothing left running or open afterwards."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from django.db import IntegrityError, connection, transaction

from annotation.core.threads import InOrder, quick_thread_switches
from annotation.imports.writer import BulkWriter, RawJson
from annotation.models import Prompt


def _thread_names() -> set[str]:
    return {thread.name for thread in threading.enumerate()}


def test_calls_run_in_order_on_their_thread_while_the_caller_goes_on():
    ran: list[tuple[int, str]] = []
    release = threading.Event()
    calls = InOrder(name="test-in-order", depth=8)
    try:
        calls.submit(release.wait)  # the caller is not held up by a call that waits
        for number in range(5):
            calls.submit(
                lambda number=number: ran.append((number, threading.current_thread().name))
            )
        assert ran == []
        release.set()
        calls.drain()
    finally:
        calls.close()
    assert ran == [(number, "test-in-order") for number in range(5)]
    assert "test-in-order" not in _thread_names()


def test_the_first_error_reaches_the_caller_and_the_calls_after_it_are_dropped():
    ran = []

    def failing():
        raise ValueError("row 3 refused")

    calls = InOrder(name="test-in-order")
    try:
        calls.submit(lambda: ran.append(1))
        calls.submit(failing)
        calls.submit(lambda: ran.append(2))
        with pytest.raises(ValueError, match="row 3 refused"):
            calls.drain()
        with pytest.raises(ValueError, match="row 3 refused"):
            calls.submit(lambda: ran.append(3))
    finally:
        calls.close()
    assert ran == [1]


def test_a_caller_ahead_by_depth_calls_waits_for_room():
    release = threading.Event()
    calls = InOrder(name="test-in-order", depth=1)
    try:
        calls.submit(release.wait)  # running
        calls.submit(lambda: None)  # waiting: the queue is full
        blocked = threading.Thread(target=calls.submit, args=(lambda: None,))
        blocked.start()
        blocked.join(0.2)
        assert blocked.is_alive()
        release.set()
        blocked.join(5)
        assert not blocked.is_alive()
        calls.drain()
    finally:
        release.set()
        calls.close()


def test_close_waits_for_the_call_running_and_drops_those_waiting():
    ran = []
    started = threading.Event()

    def slow():
        started.set()
        time.sleep(0.2)
        ran.append("slow")

    calls = InOrder(name="test-in-order")
    calls.submit(slow)
    calls.submit(lambda: ran.append("waiting"))
    started.wait(5)
    calls.close()
    assert ran == ["slow"]
    assert "test-in-order" not in _thread_names()


def test_quick_switches_last_as_long_as_the_last_block_and_the_interval_comes_back():
    default = sys.getswitchinterval()
    first, second = quick_thread_switches(), quick_thread_switches()
    first.__enter__()
    assert sys.getswitchinterval() < default
    second.__enter__()
    first.__exit__(None, None, None)
    assert sys.getswitchinterval() < default  # the second block still runs
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == default


def _prompt(project, number: int) -> dict:
    return {
        "id": f"{number:032x}",
        "project_id": project.pk,
        "content": RawJson('[{"text":"line one\\nline\\ttwo \\\\ three","type":"text"}]'),
        "source": "tab\there",
        "metadata": RawJson("{}"),
    }


def _backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def _backends_back_to(count: int) -> bool:
    for _ in range(50):
        if _backends() == count:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.django_db(transaction=True)
def test_rows_written_in_order_are_the_rows_given_and_nothing_is_left_open(project):
    backends = _backends()
    senders = []
    writer = BulkWriter()
    real_send = writer._send

    def send(*args):
        senders.append(threading.current_thread().name)
        real_send(*args)

    writer._send = send
    with transaction.atomic():
        with writer.in_order():
            for start in (0, 10, 20):
                writer.insert(
                    Prompt, [_prompt(project, number) for number in range(start, start + 10)]
                )
            assert "import-writer" in _thread_names()
        # Every statement has run by the end of the block, in this transaction.
        assert Prompt.objects.filter(project=project).count() == 30
    assert senders == ["import-writer"] * 3
    stored = Prompt.objects.get(pk=f"{7:032x}")
    assert stored.content == [{"type": "text", "text": "line one\nline\ttwo \\ three"}]
    assert stored.source == "tab\there"
    assert "import-writer" not in _thread_names()
    assert not connection.allow_thread_sharing
    assert _backends_back_to(backends)  # the connection taking the ids is closed


@pytest.mark.django_db(transaction=True)
def test_a_statement_that_fails_on_its_thread_fails_the_callers_block(project):
    backends = _backends()
    writer = BulkWriter()

    def write_twice():
        with transaction.atomic(), writer.in_order():
            writer.insert(Prompt, [_prompt(project, 1)])
            writer.insert(Prompt, [_prompt(project, 1)])  # the same id again
            writer.insert(Prompt, [_prompt(project, 2)])  # dropped: the transaction is lost

    with pytest.raises(IntegrityError):
        write_twice()
    assert not Prompt.objects.filter(project=project).exists()  # rolled back
    assert "import-writer" not in _thread_names()
    assert not connection.allow_thread_sharing
    assert _backends_back_to(backends)
