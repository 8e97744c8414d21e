"""The pairs browser's text search (docs/curators.md): what a pair's search words are, what a
search finds on each database, that imports and the migration write the words, and that a
search costs the browser's usual two queries."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from annotation.core.content import image_part, text_part
from annotation.core.search import MAX_PAIR_WORDS_CHARS, MAX_WORD_CHARS, search_words
from annotation.imports.importer import pairs_import
from annotation.models import Pair
from annotation.pairs.selectors import PairFilters, pairs_browse
from tests.annotation.imports.conftest import text_pair, write_jsonl
from tests.annotation.pairs.test_pairs_browser import browser_url, shown_ids
from tests.annotation.queue.conftest import make_image
from tests.factories import PairFactory, make_prompt, make_response


def test_search_words_are_the_id_prompt_text_and_model_names_folded_to_lower_case():
    words = search_words(
        external_id="Set-A/0042",
        texts=["A RED circle, above a blue square.", "Straße"],
        model_names=("GPT-4o", ""),
    )
    assert words == "set a 0042 a red circle above a blue square strasse gpt 4o"


def test_search_words_split_long_words_and_stop_at_the_limit():
    long_word = "x" * MAX_WORD_CHARS + "y" * 50
    words = search_words(external_id="", texts=[long_word], model_names=())
    assert words == f"{'x' * MAX_WORD_CHARS} {'y' * 50}"
    many = " ".join(f"w{n:05d}" for n in range(MAX_PAIR_WORDS_CHARS // 6 + 100))
    words = search_words(external_id="id1", texts=[many], model_names=("late-model",))
    assert MAX_PAIR_WORDS_CHARS - 7 <= len(words) <= MAX_PAIR_WORDS_CHARS
    assert words.startswith("id1 w00000 w00001 ")
    assert "late" not in words
    assert all(len(word) == 6 for word in words.split()[1:])  # none cut in the middle


@pytest.fixture
def library(project):
    """Pairs whose prompts, ids and models a curator searches for."""
    image = make_image(project, (9, 9, 9))
    specs = [
        ("lh-1", [text_part("A lighthouse at night"), image_part(image)], "painter-x"),
        ("lh-2", [text_part("Two LIGHTHOUSES on a cliff")], "painter-y"),
        ("cat-7", [text_part("a cat asleep on a lighthouse stair")], "painter-x"),
        ("cat-70", [text_part("a grey cat")], "scribe-2"),
        ("odd id/#1", [text_part("nothing to see")], "scribe-2"),
        ("long", [text_part("x" * 150)], "scribe-2"),
    ]
    for external_id, content, model in specs:
        PairFactory(
            project=project,
            external_id=external_id,
            prompt=make_prompt(project, "", content),
            response_a=make_response(project, model, f"a for {external_id}"),
        )
    return image


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("lighthouse", ["lh-1", "lh-2", "cat-7"]),  # any case, a word of the prompt
        ("lightho", ["lh-1", "lh-2", "cat-7"]),  # the start of a word
        ("cat lighthouse", ["cat-7"]),  # every word, in any order
        ("Lighthouse, CAT!", ["cat-7"]),  # punctuation separates words
        ("painter-x", ["lh-1", "cat-7"]),  # model names
        ("cat-70", ["cat-70"]),  # an id
        ("odd id/#1", ["odd id/#1"]),
        ("#", []),  # no words, and no such id
        ("%", []),
        ("_", []),
        ("x" * 130, ["long"]),  # a long word, split as its pair's words were
    ],
)
def test_a_search_finds_words_of_the_prompt_ids_and_model_names(
    client_for, carol, project, library, q, expected
):
    response = client_for(carol).get(browser_url(project), {"q": q})
    assert response.status_code == 200
    assert shown_ids(response) == expected


def test_a_search_never_matches_image_hashes(client_for, carol, project, library):
    assert shown_ids(client_for(carol).get(browser_url(project), {"q": library[:12]})) == []


def test_a_search_finds_nothing_in_another_project(client_for, carol, project, other_project):
    PairFactory(project=other_project, prompt=make_prompt(other_project, "a lighthouse"))
    assert shown_ids(client_for(carol).get(browser_url(project), {"q": "lighthouse"})) == []


def test_a_search_word_matches_the_start_of_words_only(client_for, carol, project, library):
    client = client_for(carol)
    assert shown_ids(client.get(browser_url(project), {"q": "ighthouse"})) == []
    # Searching an id's number finds that id and the ids it starts.
    assert shown_ids(client.get(browser_url(project), {"q": "7"})) == ["cat-7", "cat-70"]


def test_the_search_column_is_a_gin_indexed_tsvector(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'pair_search_idx'",
        )
        (definition,) = cursor.fetchone()
    assert "USING gin (search_words)" in definition
    assert Pair._meta.get_field("search_words").db_type(connection) == "tsvector"


def test_imported_pairs_are_found_by_their_words(client_for, carol, project, tmp_path):
    pairs = [
        text_pair("imp-1", prompt="The Eiffel tower at dawn"),
        text_pair("imp-2", prompt="A windmill"),
    ]
    pairs_import(project=project, source=write_jsonl(tmp_path / "pairs.jsonl", pairs))
    client = client_for(carol)
    assert shown_ids(client.get(browser_url(project), {"q": "eiffel"})) == ["imp-1"]
    assert shown_ids(client.get(browser_url(project), {"q": "m-two"})) == ["imp-1", "imp-2"]
    assert shown_ids(client.get(browser_url(project), {"q": "imp-2"})) == ["imp-2"]


def test_the_migration_fills_the_words_of_pairs_already_there(project, library):
    Pair.objects.filter(project=project).update(search_words="")
    migration = importlib.import_module("annotation.migrations.0012_pair_search_words")
    # The fill reads and writes rows only: it needs the schema editor's connection, not DDL.
    migration.fill_search_words(apps, SimpleNamespace(connection=connection))
    pair = Pair.objects.get(project=project, external_id="lh-1")
    expected = search_words(
        external_id="lh-1",
        texts=["A lighthouse at night"],
        model_names=("painter-x", pair.response_b.model_name),
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::tsvector::text", [expected])
        (expected,) = cursor.fetchone()
    assert pair.search_words == expected


def test_a_search_costs_the_usual_two_queries(project, library, django_assert_num_queries):
    with django_assert_num_queries(2):
        page = pairs_browse(project=project, filters=PairFilters(q="lighthouse cat"), limit=2)
    assert [row.pair.external_id for row in page.rows] == ["cat-7"]
    assert page.total == 1
