"""The pairs browser's text search (docs/curators.md): the words of a pair, kept on its row.

``search_words`` turns a pair's id, its prompt's text and its models' names into one string
of lower-case words, which the importer writes into ``Pair.search_words`` in the rows it
copies anyway. On PostgreSQL that column is a ``tsvector`` (the string is its input syntax)
with a GIN index, and a search is a prefix match of every word it holds; elsewhere it is plain
text and each word is looked for with ``icontains``. Both sides split words the same way here,
so what is written and what is asked for always agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db import models
from django.db.models import Q

# A word: letters, digits and underscores (Unicode), compared case-folded.
_WORD = re.compile(r"\w+")
# Longer words are cut (the same way in a search, which then matches them by their start):
# PostgreSQL refuses lexemes over 2 KB.
MAX_WORD_CHARS = 100
# The words of a pair past this many characters are not written: a tsvector holds at most
# 1 MB, and a prompt this long is found by its first words.
MAX_SEARCH_CHARS = 100_000


def _words(text: str) -> list[str]:
    return [word[:MAX_WORD_CHARS] for word in _WORD.findall(text.casefold())]


def search_words(*, external_id: str, texts: Iterable[str], model_names: Iterable[str]) -> str:
    """A pair's words (its id, its prompt's text parts, its models' names), lower-case,
    separated by single spaces, at most ``MAX_SEARCH_CHARS`` characters of them."""
    kept: list[str] = []
    length = 0
    for text in (external_id, *texts, *model_names):
        for word in _words(text):
            length += len(word) + 1
            if length > MAX_SEARCH_CHARS + 1:
                return " ".join(kept)
            kept.append(word)
    return " ".join(kept)


def text_parts(content: list[dict]) -> list[str]:
    """The text parts of stored content, in order (an image's hash is no word of a pair)."""
    return [part["text"] for part in content if part["type"] == "text"]


class SearchWordsField(models.TextField):
    """``search_words`` output: a ``tsvector`` on PostgreSQL, text elsewhere."""

    def db_type(self, connection) -> str | None:
        if connection.vendor == "postgresql":
            return "tsvector"
        return super().db_type(connection)


@SearchWordsField.register_lookup
class _Matches(models.Lookup):
    """``search_words__matches=TSQUERY``: the tsvector matches a tsquery given in its input
    syntax (PostgreSQL only)."""

    lookup_name = "matches"

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} @@ ({rhs})::tsquery", [*lhs_params, *rhs_params]


def search_condition(*, text: str, vendor: str, field: str = "search_words") -> Q | None:
    """Rows whose ``field`` holds every word of ``text`` (PostgreSQL: a word starting with it;
    elsewhere: containing it). None when ``text`` has no words."""
    words = _words(text)
    if not words:
        return None
    if vendor == "postgresql":
        # Words hold no quote, backslash or operator character; quoted all the same.
        query = " & ".join(f"'{word}':*" for word in dict.fromkeys(words))
        return Q(**{f"{field}__matches": query})
    condition = Q()
    for word in dict.fromkeys(words):
        condition &= Q(**{f"{field}__icontains": word})
    return condition
