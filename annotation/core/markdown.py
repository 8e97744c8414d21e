"""Markdown from curators, imports and models, rendered to HTML that can carry no script.

Responses come from models and guidelines from anyone with a curator's role, so the text is
untrusted in size and shape as well as in content. The parser is markdown-it-py (CommonMark):
it does not backtrack, so its time grows linearly with the text, hostile runs of ``[`` or
``*`` included, and it caps nesting. Text longer than ``MARKDOWN_MAX_CHARS`` is shown as
plain text. Each rendering is kept in a bounded per-process cache keyed by the text's hash:
the same guidelines or response is rendered once per worker, not on every page.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

# Longer text is shown as plain paragraphs; parsing it would cost seconds on hostile input.
MARKDOWN_MAX_CHARS = 200_000
# The cache holds at most this many renderings and this many bytes of HTML, whichever is hit
# first; the least recently used go.
MARKDOWN_CACHE_ENTRIES = 1024
MARKDOWN_CACHE_BYTES = 32 * 1024 * 1024

_ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "del",
}
_ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}

# CommonMark with tables. Raw HTML is parsed as before and left to nh3, which also judges
# link schemes: markdown-it's own check would print a refused link as its source text.
_PARSER = MarkdownIt("commonmark").enable("table")
_PARSER.validateLink = lambda url: True  # type: ignore[method-assign]


class _RenderCache:
    """Least-recently-used renderings by the sha256 of their text, bounded in entries and in
    bytes; thread-safe, for gunicorn's threads."""

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> str | None:
        with self._lock:
            html = self._entries.get(key)
            if html is not None:
                self._entries.move_to_end(key)
            return html

    def put(self, key: bytes, html: str) -> None:
        if len(html) > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = html
            self._bytes += len(html)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes


_CACHE = _RenderCache(max_entries=MARKDOWN_CACHE_ENTRIES, max_bytes=MARKDOWN_CACHE_BYTES)


def render_markdown(text: str) -> SafeString:
    # A lone surrogate (possible in JSON) cannot be encoded; it becomes "?" like any other.
    encoded = (text or "").encode("utf-8", "replace")
    text = encoded.decode("utf-8")
    key = hashlib.sha256(encoded).digest()
    cached = _CACHE.get(key)
    if cached is None:
        cached = _render(text)
        _CACHE.put(key, cached)
    return mark_safe(cached)  # sanitised by nh3 in _render


def _render(text: str) -> str:
    if len(text) > MARKDOWN_MAX_CHARS:
        paragraphs = (part for part in text.split("\n\n") if part.strip())
        html = "".join(f"<p>{escape(part)}</p>\n" for part in paragraphs)
    else:
        html = _PARSER.render(text)
    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
