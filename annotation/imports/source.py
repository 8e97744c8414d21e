"""An import's input: the pairs file opened (a path or an upload), its media archive
unpacked into a work folder the import removes (a local one also when storage is S3), and
the cyclic collector paused meanwhile."""

from __future__ import annotations

import gc
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from annotation.core import storage
from annotation.core.scratch import scratch_path
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


def _unpack_folder() -> Path:
    """Beside the media on local disk; in the system temporary folder when the media live in
    the bucket, so no node keeps them (both swept when a worker starts: core/scratch.py)."""
    if not storage.is_s3():
        return Path(settings.MEDIA_ROOT) / ".unpacked" / uuid.uuid4().hex
    return scratch_path("unpacked")


def unpack_archive(archive, stack: ExitStack) -> Path:
    work = _unpack_folder()
    stack.callback(shutil.rmtree, work, ignore_errors=True)
    try:
        archive_extract(source=archive, dest=work)
    except ArchiveError as exc:
        raise ImportFailed([ImportIssue(None, "media archive", str(exc))]) from None
    return work
