"""The hot path's prepared statements (annotation/core/prepared.py): named parameters, and
instances built from their rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.signals import post_init

from annotation.core.prepared import ModelColumns, named_dollar_placeholders, positional
from annotation.models import Assignment, Pair, Project
from tests.factories import PairFactory, UserFactory

SQL = "SELECT %(a)s + %(b)s, %(a)s %% 7, '%%' || %(c)s, %(b)s"


def test_each_name_is_one_number_in_order_of_first_use():
    text, names = named_dollar_placeholders(SQL)
    assert text == "SELECT $1 + $2, $1 % 7, '%' || $3, $2"
    assert names == ("a", "b", "c")


def test_a_positional_parameter_beside_named_ones_is_refused():
    with pytest.raises(ValueError, match="positional"):
        named_dollar_placeholders("SELECT %(a)s, %s")
    # "%%s" is a literal "%" then "s", not a parameter.
    assert named_dollar_placeholders("SELECT '%%s', %(a)s") == ("SELECT '%s', $1", ("a",))


def test_positional_gives_a_value_per_mention_for_the_orm():
    text, values = positional(SQL, {"a": 1, "b": 2, "c": "x"})
    assert text == "SELECT %s + %s, %s %% 7, '%%' || %s, %s"
    assert values == [1, 2, 1, "x", 2]


def _loaded_by_django(columns: ModelColumns, row):
    """What ``ModelColumns.load`` stands for: Django's own ``from_db`` with the converters."""
    values = list(row)
    for index, column, found in columns._converters_for():
        for convert in found:
            values[index] = convert(values[index], column, connection)
    return columns.model.from_db(connection.alias, columns.attnames, values)


def _row(columns: ModelColumns, pk: int):
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT {columns.select_list()} FROM "{columns.model._meta.db_table}" '
            f'{columns.alias} WHERE {columns.alias}."id" = %s',
            [pk],
        )
        return cursor.fetchone()


@pytest.mark.django_db
@pytest.mark.parametrize("model", [Pair, Assignment, Project])
def test_load_builds_the_instance_django_builds(model):
    pair = PairFactory(metadata={"source": "x", "n": [1, 2]})
    lease = Assignment.objects.create(
        pair=pair, annotator=UserFactory(), left_is_a=True, expires_at=pair.created_at
    )
    pk = {Pair: pair.pk, Assignment: lease.pk, Project: pair.project_id}[model]
    columns = ModelColumns(model, "t")
    row = _row(columns, pk)
    loaded, expected = columns.load(row), _loaded_by_django(columns, row)
    assert type(loaded) is model
    assert {k: v for k, v in vars(loaded).items() if k != "_state"} == {
        k: v for k, v in vars(expected).items() if k != "_state"
    }
    assert (loaded._state.adding, loaded._state.db) == (False, connection.alias)
    assert loaded == model.objects.get(pk=pk)
    # Related objects load and cache as on an instance from the ORM.
    if model is Pair:
        assert loaded.project == pair.project
        assert Pair.project.is_cached(loaded)
        assert loaded.metadata == {"source": "x", "n": [1, 2]}


@pytest.mark.django_db
def test_load_still_sends_the_init_signals_when_something_listens():
    pair = PairFactory()
    columns = ModelColumns(Pair, "t")
    row = _row(columns, pair.pk)
    seen = []

    def listener(sender, instance, **kwargs):
        seen.append(instance.pk)

    post_init.connect(listener, sender=Pair)
    try:
        loaded = columns.load(row)
    finally:
        post_init.disconnect(listener, sender=Pair)
    assert seen == [pair.pk]
    assert loaded.pk == pair.pk


@pytest.mark.django_db
def test_load_goes_through_a_models_own_from_db(monkeypatch):
    """A model that builds its instances itself keeps doing so: only Django's own from_db is
    stood in for."""
    pair = PairFactory()
    row = _row(ModelColumns(Pair, "t"), pair.pk)
    built = []
    django_from_db = Pair.from_db.__func__  # type: ignore[attr-defined]  # a classmethod

    def own_from_db(cls, db, field_names, values):
        built.append(values[0])
        return django_from_db(cls, db, field_names, values)

    monkeypatch.setattr(Pair, "from_db", classmethod(own_from_db))
    loaded = ModelColumns(Pair, "t").load(row)
    assert built == [pair.pk]
    assert loaded.pk == pair.pk
