"""The hot path's statements kept as PL/pgSQL functions (annotation/core/statement_functions.py),
what ``ARBITER_STATEMENT_PLANS=functions`` runs behind PgBouncer in transaction mode."""

from __future__ import annotations

import threading

import pytest
from django.db import ProgrammingError, connection, connections, transaction

from annotation.core import statement_functions
from annotation.core.prepared import dollar_placeholders, execute_prepared

pytestmark = pytest.mark.django_db(transaction=True)

SQL = "SELECT %s::bigint * 2, %s::text || '%%', now() > %s"
PARAMS: list[int | str] = [21, "x", "2020-01-01T00:00:00+00:00"]


@pytest.fixture(autouse=True)
def _functions(settings):
    settings.ARBITER_STATEMENT_PLANS = "functions"
    statement_functions._KNOWN.clear()
    statement_functions._DROPPED_UNDER_US.clear()
    yield
    statement_functions._KNOWN.clear()
    statement_functions._DROPPED_UNDER_US.clear()
    with connection.cursor() as cursor:
        for stale in _versions("arbiter_test_sum"):
            cursor.execute(f"DROP FUNCTION {stale}")


def _versions(name: str) -> list[str]:
    """The functions in the database for the statement ``name``, with their signatures."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT oid::regprocedure::text || ' -> ' || pg_get_function_result(oid) FROM pg_proc"
            " WHERE proname ~ %s ORDER BY 1",
            [f"^{name}_[0-9a-f]{{8}}$"],
        )
        return [row[0].split(" -> ")[0] for row in cursor.fetchall()]


def _run(sql: str = SQL, params: list | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        execute_prepared(cursor, "arbiter_test_sum", sql, PARAMS if params is None else params)
        return cursor.fetchall()


def test_the_function_answers_what_the_statement_answers_with_postgresqls_types():
    with connection.cursor() as cursor:
        cursor.execute(SQL, PARAMS)
        expected = cursor.fetchall()
    assert _run() == expected == [(42, "x%", True)]
    (signature,) = _versions("arbiter_test_sum")
    assert signature.endswith("(bigint,text,timestamp with time zone)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_function_result(%s::regprocedure)", [signature])
        assert cursor.fetchone() == ("TABLE(c1 bigint, c2 text, c3 boolean)",)


def test_inside_a_transaction_the_statement_runs_as_it_is_till_it_commits():
    with transaction.atomic():
        assert _run() == [(42, "x%", True)]
        assert _versions("arbiter_test_sum") == []
    # Made after the commit, in a transaction of its own.
    assert len(_versions("arbiter_test_sum")) == 1
    # Another connection finds it in the catalog: nothing about it lives in a session.
    function = statement_functions._KNOWN[("arbiter_test_sum", dollar_placeholders(SQL)[0])]
    assert function is not None
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute(function.call, PARAMS)
            assert cursor.fetchall() == [(42, "x%", True)]
    finally:
        other.close()


def test_a_transaction_that_rolls_back_makes_no_function():
    def run_then_fail():
        with transaction.atomic():
            assert _run() == [(42, "x%", True)]
            raise RuntimeError("the caller's transaction rolls back")

    with pytest.raises(RuntimeError):
        run_then_fail()
    assert _versions("arbiter_test_sum") == []
    assert _run() == [(42, "x%", True)]
    assert len(_versions("arbiter_test_sum")) == 1


def test_without_create_on_the_schema_the_statement_runs_unplanned_with_a_warning(caplog):
    with connection.cursor() as cursor:
        cursor.execute("DROP ROLE IF EXISTS arbiter_test_no_create")
        cursor.execute("CREATE ROLE arbiter_test_no_create")
        cursor.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        cursor.execute("SET ROLE arbiter_test_no_create")
    try:
        assert _run() == [(42, "x%", True)]
        assert _run() == [(42, "x%", True)]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
            cursor.execute("DROP ROLE arbiter_test_no_create")
    assert _versions("arbiter_test_sum") == []
    (warning,) = [r.getMessage() for r in caplog.records if r.name.endswith("functions")]
    assert "arbiter_test_sum runs unplanned" in warning
    assert "permission denied for schema public" in warning


def test_a_new_version_of_a_statement_replaces_the_old_function():
    _run()
    (old,) = _versions("arbiter_test_sum")
    assert _run(SQL.replace("* 2", "* 3")) == [(63, "x%", True)]
    (new,) = _versions("arbiter_test_sum")
    assert new != old


def test_a_function_dropped_under_a_process_fails_one_call_and_is_made_again():
    _run()
    (made,) = _versions("arbiter_test_sum")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION {made}")
    with pytest.raises(ProgrammingError, match="does not exist"):
        _run()
    assert _run() == [(42, "x%", True)]
    assert _versions("arbiter_test_sum") == [made]


def test_a_process_of_the_previous_release_does_not_drop_the_new_releases_function():
    old_sql = SQL.replace("* 2", "* 3")
    assert _run(old_sql) == [(63, "x%", True)]
    (old,) = _versions("arbiter_test_sum")
    # A process of the new release makes its version and drops the old one...
    new = statement_functions._created("arbiter_test_sum", dollar_placeholders(SQL)[0]).name
    assert [signature.split("(")[0] for signature in _versions("arbiter_test_sum")] == [new]
    # ...under this process, which fails once, then makes its own again beside the new one.
    with pytest.raises(ProgrammingError, match="does not exist"):
        _run(old_sql)
    assert _run(old_sql) == [(63, "x%", True)]
    versions = _versions("arbiter_test_sum")
    assert len(versions) == 2
    assert old in versions
    assert any(version.startswith(f"{new}(") for version in versions)


def test_processes_starting_at_once_make_the_function_once():
    text = dollar_placeholders(SQL)[0]
    made, errors = [], []

    def create():
        # What each process does the first time it runs the statement, on its own connection.
        try:
            made.append(statement_functions._created("arbiter_test_sum", text).name)
        except Exception as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(made) == 4
    assert len(set(made)) == 1
    assert len(_versions("arbiter_test_sum")) == 1
    assert _run() == [(42, "x%", True)]


def test_a_statement_that_returns_no_rows_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"arbiter_test_sum: .*RETURNING"):
        _run("UPDATE annotation_pair SET vote_count = vote_count WHERE id = %s", [0])
