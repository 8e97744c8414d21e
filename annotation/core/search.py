"""The pairs browser's text search (docs/curators.md): the words of a pair, kept on its row.

``search_words`` turns a pair's id, its prompt's text and its models' names into one string
of lower-case words, which the importer writes into ``Pair.search_words`` in the rows it
copies anyway. That column is a ``tsvector`` (the string is its input syntax) with a GIN
index, and a search is a prefix match of every word it holds. Both sides split words the same
way here, so what is written and what is asked for always agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db import models
from django.db.models import Q

# A word: letters, digits and underscores (Unicode), compared case-folded. A longer run is
# split into words of at most this many (PostgreSQL refuses lexemes over 2 KB); a search
# splits it the same way, so it still finds it.
MAX_WORD_CHARS = 100
_WORD = re.compile(rf"\w{{1,{MAX_WORD_CHARS}}}")
# A pair's words stop after this many characters (a tsvector holds at most 1 MB): a longer
# prompt is found by its first words.
MAX_PAIR_WORDS_CHARS = 100_000


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def search_words(*, external_id: str, texts: Iterable[str], model_names: Iterable[str]) -> str:
    """A pair's words (its id, its prompt's text parts, its models' names), lower-case,
    separated by single spaces, at most ``MAX_PAIR_WORDS_CHARS`` characters of them. Written
    for every imported pair, so it is one pass over the text."""
    words = " ".join(_words(" ".join((external_id, *texts, *model_names))))
    if len(words) > MAX_PAIR_WORDS_CHARS:
        words = words[: words.rfind(" ", 0, MAX_PAIR_WORDS_CHARS + 1)]
    return words


def text_parts(content: list[dict]) -> list[str]:
    """The text parts of stored content, in order (an image's hash is no word of a pair)."""
    return [part["text"] for part in content if part["type"] == "text"]


class SearchWordsField(models.TextField):
    """``search_words`` output: a ``tsvector``."""

    def db_type(self, connection) -> str | None:
        return "tsvector"


@SearchWordsField.register_lookup
class _Matches(models.Lookup):
    """``search_words__matches=TSQUERY``: the tsvector matches a tsquery given in its input
    syntax."""

    lookup_name = "matches"

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} @@ ({rhs})::tsquery", [*lhs_params, *rhs_params]


def search_condition(*, text: str) -> Q | None:
    """Pairs whose ``search_words`` hold, for every word of ``text``, a word starting with
    it. None when ``text`` has no words."""
    words = _words(text)
    if not words:
        return None
    # Words hold no quote, backslash or operator character; quoted all the same.
    query = " & ".join(f"'{word}':*" for word in dict.fromkeys(words))
    return Q(search_words__matches=query)
