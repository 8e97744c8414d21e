"""The raw SQL of imports (annotation/imports/sql.py): every table and column a statement
names exists in the schema the migrations built."""

from __future__ import annotations

import inspect
import re
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from annotation.imports import sql
from annotation.models import ImportJob, Pair, Prompt

pytestmark = pytest.mark.django_db

STATEMENTS = {
    "project_lock": lambda: sql.project_lock(namespace=1, key=2),
    "project_lock_try": lambda: sql.project_lock_try(namespace=1, key=2),
    "lock_kept_while_idle": sql.lock_kept_while_idle,
    "constraints_immediate": sql.constraints_immediate,
    "constraints_deferred": sql.constraints_deferred,
    "sequential_scans": lambda: sql.sequential_scans(allowed=False),
    "rows_matching": lambda: sql.rows_matching(
        Pair,
        "external_id",
        ["p1"],
        project_id=1,
        fields=("prompt_id", "response_a_id", "response_b_id", "criterion", "task"),
    ),
    "statistics_refresh": lambda: sql.statistics_refresh(Pair, ["project_id", "external_id"]),
    "serial_ids": lambda: sql.serial_ids(Pair, 3),
    "rows_copy": lambda: sql.rows_copy(Prompt, ["id", "project_id", "content", "metadata"]),
    "import_job_progress": lambda: sql.import_job_progress(
        job_id=1, bytes_done=10, lines_done=2, at=timezone.now()
    ),
}
_QUOTED = re.compile(r'"([^"]+)"')


def _schema() -> dict[str, set[str]]:
    with connection.cursor() as cursor:
        return {
            table: {
                column.name
                for column in connection.introspection.get_table_description(cursor, table)
            }
            for table in connection.introspection.table_names(cursor)
        }


def test_every_statement_function_is_checked():
    functions = {
        name
        for name, function in inspect.getmembers(sql, inspect.isfunction)
        if function.__module__ == sql.__name__ and not name.startswith("_")
    }
    assert functions == set(STATEMENTS)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_statement_names_only_existing_tables_and_columns(name):
    statement, params = STATEMENTS[name]()
    assert isinstance(statement, str)
    assert isinstance(params, list)
    assert statement.count("%s") == len(params)
    schema = _schema()
    names = _QUOTED.findall(statement)
    tables = [n for n in names if n in schema]
    columns = [n for n in names if n not in schema]
    known = set().union(*(schema[table] for table in tables)) if tables else set()
    assert not [column for column in columns if column not in known], (statement, tables)
    # Names passed as parameters (the sequence's table and column) must exist as well.
    if name == "serial_ids":
        table, column = params[:2]
        assert column in schema[table]


def test_statements_name_their_tables():
    assert '"annotation_pair"' in sql.rows_matching(Pair, "external_id", [], project_id=1)[0]
    assert '"annotation_prompt"' in sql.rows_matching(Prompt, "id", [uuid.uuid4()])[0]
    assert f'"{ImportJob._meta.db_table}"' in STATEMENTS["import_job_progress"]()[0]


def test_a_name_without_a_column_is_refused_with_its_field():
    with pytest.raises(ValueError, match=r"annotation\.Prompt\.pairs: not a column of its table"):
        sql.rows_copy(Prompt, ["id", "pairs"])
