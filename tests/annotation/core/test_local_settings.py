"""PostgreSQL settings last one transaction, never a session (annotation/core/local_settings.py;
docs/database.md, "Behind PgBouncer"): behind PgBouncer in transaction mode a setting left on
a server connection would reach whichever client's transaction comes next. Every statement
a release build, the agreement report and the leaderboard send that changes a setting is
transaction-local and runs in a transaction; tests/test_pgbouncer.py runs them through the
real pooler."""

from __future__ import annotations

import re

import pytest
from django.db import connection, transaction
from django.db.backends.signals import connection_created

from annotation.agreement.services import agreement_report_recompute
from annotation.core.local_settings import local_settings
from annotation.leaderboard.selectors import model_outcomes
from tests.annotation.releases.conftest import built_release

# A statement that changes a setting, and the forms that last a transaction at most.
_SETS = re.compile(r"^\s*(SET|RESET)\b|set_config\(", re.IGNORECASE)
_LOCAL = re.compile(
    r"^\s*SET\s+(LOCAL|TRANSACTION|CONSTRAINTS)\b|^SELECT (set_config\(%s, %s, true\)(, )?)+$",
    re.IGNORECASE,
)


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s)", [name])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_setting_lasts_the_blocks_own():
    before = _setting("work_mem")
    with local_settings(work_mem="17MB"):
        assert connection.in_atomic_block
        assert _setting("work_mem") == "17MB"
    assert _setting("work_mem") == before


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_a_setting_is_put_back_at_the_end_of_the_block():
    with transaction.atomic():
        before = _setting("jit")
        with local_settings(jit="off" if before == "on" else "on"):
            assert _setting("jit") != before
        assert _setting("jit") == before

        def reading():
            with local_settings(work_mem="19MB"):
                yield _setting("work_mem")
                yield "never reached"

        rows = reading()
        assert next(rows) == "19MB"
        rows.close()  # a reader stopped early
        assert _setting("work_mem") != "19MB"


@pytest.fixture
def statements_changing_settings():
    """Every statement that changes a setting, on every connection this process opens from
    now on (the release build reads on threads of its own) and the current one: its text
    and whether it ran inside a transaction."""
    seen: list[tuple[str, bool]] = []

    def record(execute, sql, params, many, context):
        if _SETS.search(sql):
            seen.append((sql, context["connection"].in_atomic_block))
        return execute(sql, params, many, context)

    def install(sender, connection, **kwargs):
        connection.execute_wrappers.append(record)

    connection.execute_wrappers.append(record)
    connection_created.connect(install)
    yield seen
    connection_created.disconnect(install)
    connection.execute_wrappers.remove(record)


@pytest.mark.django_db(transaction=True)
def test_a_release_build_a_report_and_the_leaderboard_leave_no_setting_on_the_session(
    filled, dave, statements_changing_settings
):
    built_release(filled, dave)
    agreement_report_recompute(project=filled)
    model_outcomes(project=filled, source="votes")
    assert statements_changing_settings, "the build and the leaderboard set work_mem and jit"
    for sql, in_transaction in statements_changing_settings:
        assert in_transaction, sql
        assert _LOCAL.search(sql), sql
