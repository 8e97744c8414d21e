"""PostgreSQL settings for one block of work, never for the session: behind PgBouncer in
transaction mode a session's next transaction may run on another server connection, and a
``SET`` left on this one would change an annotator's request that lands there
(docs/database.md, "Behind PgBouncer"). The same SQL runs with and without the pooler."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def local_settings(**values: str) -> Iterator[None]:
    """``values`` (``work_mem="64MB"``) set for the block as ``SET LOCAL`` sets them: outside
    a transaction, for a transaction of the block's own (in force at its commit, as
    ``synchronous_commit`` must be); inside the caller's, put back as they were when the
    block ends (also when a generator around it is closed early), so they last neither past
    the transaction nor past the block. A block that raises leaves them to the rollback."""
    names = list(values)
    if not connection.in_atomic_block:
        with transaction.atomic():
            _write(names, [values[name] for name in names])
            yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["current_setting(%s)"] * len(names)), names)
        before = cursor.fetchone()
    _write(names, [values[name] for name in names])
    try:
        yield
    except GeneratorExit:
        _write(names, before)
        raise
    _write(names, before)


def _write(names: list[str], values) -> None:
    pairs = [item for pair in zip(names, values, strict=True) for item in pair]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names)), pairs)
