"""An import's input: the pairs file opened (a path or an upload), its media archive
unpacked into a work folder the import removes, and the interpreter set for it meanwhile (the
cyclic collector paused, threads switching sooner)."""

from __future__ import annotations

import gc
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from annotation.imports.archive import ArchiveError, archive_extract
from annotation.imports.errors import ImportFailed, ImportIssue


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """An import allocates millions of short-lived objects that reference counting frees;
    the cyclic collector would rescan them all again and again (a third of the CPU time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


READ_BUFFER_BYTES = 1 << 20
# Seconds a thread may hold the GIL while another waits for it (Python's default is 0.005).
SWITCH_INTERVAL = 0.0005


@contextmanager
def quick_thread_switches() -> Iterator[None]:
    """The writer thread spends the import waiting for the database; each time an answer
    comes back it waits again for the GIL, which the reader thread (checking and hashing)
    holds for up to the switch interval. At Python's 5 ms, the few hundred statements and
    COPY flushes of a large import waited seconds in all, the database idle meanwhile."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(min(was, SWITCH_INTERVAL))
    try:
        yield
    finally:
        sys.setswitchinterval(was)


def open_source(source, stack: ExitStack) -> tuple[BinaryIO, str, int]:
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            # A large buffer: each refill releases the GIL, and waits to get it back.
            stream = stack.enter_context(
                open(path, "rb", buffering=READ_BUFFER_BYTES)  # noqa: SIM115 - the stack closes it
            )
        except OSError as exc:
            raise ImportFailed([ImportIssue(None, None, f"cannot read {path}: {exc}")]) from None
        return stream, path.name, os.fstat(stream.fileno()).st_size
    stream = source
    stream.seek(0, os.SEEK_END)
    total = stream.tell()
    stream.seek(0)
    return stream, os.path.basename(getattr(source, "name", "") or ""), total


def unpack_archive(archive, stack: ExitStack) -> Path:
    work = Path(settings.MEDIA_ROOT) / ".unpacked" / uuid.uuid4().hex
    stack.callback(shutil.rmtree, work, ignore_errors=True)
    try:
        archive_extract(source=archive, dest=work)
    except ArchiveError as exc:
        raise ImportFailed([ImportIssue(None, "media archive", str(exc))]) from None
    return work
