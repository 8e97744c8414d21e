"""Markdown rendering is linear in the text and cached (docs/architecture.md, "Markdown"):
responses come from models and guidelines from curators, so a hostile text must not hold a
worker. Python-Markdown took 10 s on 4,000 ``[`` and 52 s on 8,000."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from annotation.core import markdown
from annotation.core.markdown import MARKDOWN_MAX_CHARS, render_markdown

# A generous bound for a parser without backtracking on a loaded machine: 50 µs a character
# (a 100,000-character text in 5 s of CPU time; markdown-it-py takes about 1.5 s).
SECONDS_PER_CHAR = 50e-6

HOSTILE = {
    "brackets": "ok " + "[" * 100_000,
    "images, emphasis and closed brackets": (
        "![" * 10_000 + "*a" * 10_000 + "[" * 10_000 + "]" * 10_000 + "`a" * 10_000
    ),
}


@pytest.fixture(autouse=True)
def empty_cache():
    markdown._CACHE.clear()
    yield
    markdown._CACHE.clear()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_text_renders_in_linear_time(name):
    text = HOSTILE[name]
    started = time.process_time()
    html = render_markdown(text)
    elapsed = time.process_time() - started
    assert elapsed < SECONDS_PER_CHAR * len(text), f"{elapsed:.1f} s for {len(text)} characters"
    assert "[[[" in html
    assert "<script" not in html


def test_rendering_is_cached_by_text(monkeypatch):
    calls = []
    parse = markdown._PARSER.render
    monkeypatch.setattr(markdown._PARSER, "render", lambda text: calls.append(text) or parse(text))
    first = render_markdown("**bold** [link](https://example.org)")
    second = render_markdown("**bold** [link](https://example.org)")
    assert first == second
    assert "<strong>bold</strong>" in first
    assert len(calls) == 1
    render_markdown("*other*")
    assert len(calls) == 2


def test_the_cache_is_bounded_in_entries_and_bytes(monkeypatch):
    cache = markdown._RenderCache(max_entries=3, max_bytes=40)
    for n in range(5):
        cache.put(bytes([n]), "x" * 10)
    assert len(cache) == 3
    assert cache.get(bytes([0])) is None
    assert cache.get(bytes([4]))
    cache.put(b"big", "y" * 25)
    assert cache.size_bytes <= 40
    assert cache.get(b"big")
    cache.put(b"huge", "z" * 41)  # larger than the whole cache: not kept
    assert cache.get(b"huge") is None


def test_guidelines_are_rendered_once_for_every_page(client_for, alice, bob, project, monkeypatch):
    """Hostile guidelines (99,000 ``[`` hung every member's pages) cost one rendering."""
    project.guidelines = "Read **this** " + "[" * 20_000
    project.save(update_fields=["guidelines"])
    calls = []
    parse = markdown._PARSER.render
    monkeypatch.setattr(markdown._PARSER, "render", lambda text: calls.append(1) or parse(text))
    url = reverse("project-detail", args=[project.slug])
    for member in (alice, bob, alice):
        body = client_for(member).get(url).content.decode()
        assert "Read <strong>this</strong>" in body
    assert len(calls) == 1


def test_text_above_the_limit_is_shown_as_plain_text():
    text = "**not bold** <script>x</script>\n\n" + "a" * MARKDOWN_MAX_CHARS
    html = render_markdown(text)
    assert html.startswith("<p>**not bold** &lt;script&gt;x&lt;/script&gt;</p>")
    assert "<strong>" not in html


def test_lone_surrogates_render():
    assert render_markdown("a \ud800 **b**") == "<p>a ? <strong>b</strong></p>\n"


def test_links_keep_their_safe_schemes_only():
    text = "[x](javascript:alert(1)) [y](https://example.org) [z](data:text/html,1)"
    html = render_markdown(text)
    assert "javascript:" not in html
    assert "data:" not in html
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">y</a>' in html
