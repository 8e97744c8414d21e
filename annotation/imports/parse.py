"""Reading an import file as a stream of pairs, each with the line it starts on, and checking
every field against the import format (docs/import-format.md).

Two layouts: JSON Lines (one pair per line) and one JSON document ``{"pairs": [...]}`` as
MMRB2 releases it (a bare top-level list of pairs is accepted too). Neither is ever read whole.
The JSON document is cut into pairs by ``json``'s C decoder (``raw_decode``) over a sliding
buffer, which keeps the exact line of every pair and every syntax error (ijson reports no
positions, and pretty-printed MMRB2 files need line numbers to be fixable).
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

from annotation.imports.errors import ImportIssue

CHUNK_BYTES = 1 << 20
# A single pair (or JSONL line) larger than this is refused instead of filling memory.
MAX_RECORD_BYTES = 64 << 20
# The pattern matches the empty string, so it never returns None: cast once here, not in the
# parser's inner loop.
_whitespace_at = cast(Callable[[str, int], re.Match[str]], re.compile(r"[ \t\n\r]*").match)
_BOM = "\ufeff"
JSONL_SUFFIXES = (".jsonl", ".ndjson")
# What json raises besides JSONDecodeError: RecursionError for deep nesting, ValueError for an
# integer longer than Python converts.
_TOO_DEEP_TO_READ = "not valid JSON: nested too deeply to read"
_NUMBER_TOO_LONG = f"not valid JSON: a number has more than {sys.get_int_max_str_digits()} digits"


def record_too_long() -> str:
    return f"the pair is longer than {MAX_RECORD_BYTES:,} bytes"


@dataclass(frozen=True)
class RawRecord:
    line: int
    data: Any


class _Stop(Exception):
    """A syntax error after which the rest of a JSON document cannot be read."""

    def __init__(self, issue: ImportIssue):
        self.issue = issue


class PairFileReader:
    """Iterates a pairs file as ``RawRecord`` or ``ImportIssue`` items; ``bytes_read`` tells
    how far it got (for progress bars)."""

    def __init__(self, stream: BinaryIO, *, name: str = ""):
        self.stream = stream
        self.name = name.lower()
        self.bytes_read = 0

    def __iter__(self) -> Iterator[RawRecord | ImportIssue]:
        if self.name.endswith(JSONL_SUFFIXES):
            yield from self._jsonl()
            return
        first = self._first_significant_byte()
        if first in (b"{", b"["):
            document = _DocumentReader(self)
            yield from document
            if not document.was_jsonl:
                return
            # The first object had no "pairs" key: it was a pair, so this is JSON Lines.
            self.stream.seek(0)
            self.bytes_read = 0
        yield from self._jsonl()

    def _first_significant_byte(self) -> bytes:
        head = self.stream.read(4096)
        self.stream.seek(0)
        stripped = head.lstrip(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
        return stripped[:1]

    def _jsonl(self) -> Iterator[RawRecord | ImportIssue]:
        readline = self.stream.readline
        line_no = 0
        while True:
            raw = readline(MAX_RECORD_BYTES + 1)
            if not raw:
                return
            line_no += 1
            self.bytes_read += len(raw)
            if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
                yield ImportIssue(line_no, None, record_too_long())
                while raw and not raw.endswith(b"\n"):
                    raw = readline(CHUNK_BYTES)
                    self.bytes_read += len(raw)
                continue
            if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except UnicodeDecodeError:
                yield ImportIssue(line_no, None, "not valid UTF-8 text")
                continue
            except json.JSONDecodeError as exc:
                yield ImportIssue(line_no, None, f"not valid JSON: {exc.msg} (column {exc.colno})")
                continue
            except RecursionError:
                yield ImportIssue(line_no, None, _TOO_DEEP_TO_READ)
                continue
            except ValueError:
                yield ImportIssue(line_no, None, _NUMBER_TOO_LONG)
                continue
            yield RawRecord(line_no, data)


class _DocumentReader:
    """Streams the items of ``{"pairs": [...]}`` (or ``[...]``) with their line numbers."""

    def __init__(self, owner: PairFileReader):
        self.owner = owner
        self.decoder = json.JSONDecoder()
        self.utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False
        self.was_jsonl = False
        self.dropped = 0  # characters cut from the front of the buffer so far

    def __iter__(self) -> Iterator[RawRecord | ImportIssue]:
        try:
            yield from self._document()
        except _Stop as stop:
            yield stop.issue

    # Buffer handling -------------------------------------------------------------------
    def _fill(self, want: int = CHUNK_BYTES) -> bool:
        if self.eof:
            return False
        if self.pos > CHUNK_BYTES:
            self.buf = self.buf[self.pos :]
            self.dropped += self.pos
            self.pos = 0
        data = self.owner.stream.read(want)
        self.owner.bytes_read += len(data)
        try:
            text = self.utf8.decode(data, final=not data)
        except UnicodeDecodeError:
            raise _Stop(self._issue("not valid UTF-8 text", self.pos)) from None
        if not data:
            self.eof = True
        if self.line == 1 and not self.buf and text.startswith(_BOM):
            text = text[1:]
        self.buf += text
        return bool(text) or not self.eof

    def _advance(self, end: int) -> None:
        self.line += self.buf.count("\n", self.pos, end)
        self.pos = end

    def _skip_ws(self) -> None:
        while True:
            self._advance(_whitespace_at(self.buf, self.pos).end())
            if self.pos < len(self.buf) or not self._fill():
                return

    def _peek(self) -> str:
        self._skip_ws()
        return self.buf[self.pos : self.pos + 1]

    def _expect(self, chars: str, what: str) -> str:
        char = self._peek()
        if not char or char not in chars:
            found = repr(char) if char else "the end of the file"
            raise _Stop(self._issue(f"expected {what}, found {found}", self.pos))
        self._advance(self.pos + 1)
        return char

    def _issue(self, message: str, pos: int, field: str | None = None) -> ImportIssue:
        line = self.line + self.buf.count("\n", self.pos, pos)
        start = self.buf.rfind("\n", 0, pos)
        if start >= 0:
            message = f"{message} (column {pos - start})"
        elif line == 1:
            message = f"{message} (column {self.dropped + pos + 1})"
        return ImportIssue(line, field, message)

    def _value(self) -> Any:
        """Decodes the next JSON value, reading more of the file until it is complete."""
        self._skip_ws()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                maybe_truncated = exc.pos >= len(self.buf) - 16 or exc.msg.startswith(
                    "Unterminated string"
                )
                if maybe_truncated and not self.eof:
                    self._grow()
                    continue
                raise _Stop(self._issue(f"not valid JSON: {exc.msg}", exc.pos)) from None
            except RecursionError:
                raise _Stop(self._issue(_TOO_DEEP_TO_READ, self.pos)) from None
            except ValueError:
                raise _Stop(self._issue(_NUMBER_TOO_LONG, self.pos)) from None
            # A number or literal that ends exactly at the buffer's end may continue after it.
            if end == len(self.buf) and not self.eof and self.buf[end - 1] not in '}]"':
                self._grow()
                continue
            self._advance(end)
            return value

    def _grow(self) -> None:
        pending = len(self.buf) - self.pos
        if pending > MAX_RECORD_BYTES:  # characters: at least as many bytes
            raise _Stop(self._issue(record_too_long(), self.pos))
        # Doubling keeps re-decoding a large pair linear in its size.
        self._fill(max(CHUNK_BYTES, pending))

    # Structure -------------------------------------------------------------------------
    def _document(self) -> Iterator[RawRecord | ImportIssue]:
        self._fill()
        if self._peek() == "[":
            self._advance(self.pos + 1)
            yield from self._pairs()
            self._end()
            return
        first_line = self.line
        self._expect("{", "'{'")
        seen_pairs = False
        if self._peek() == "}":
            self._advance(self.pos + 1)
        else:
            while True:
                key_pos = self.pos
                key = self._value()
                if not isinstance(key, str):
                    raise _Stop(self._issue("expected a key in double quotes", key_pos))
                self._expect(":", "':'")
                if key == "pairs":
                    seen_pairs = True
                    if self._peek() != "[":
                        raise _Stop(self._issue("must be a list of pairs", self.pos, "pairs"))
                    self._advance(self.pos + 1)
                    yield from self._pairs()
                else:
                    self._value()
                if self._expect(",}", "',' or '}'") == "}":
                    break
        if not seen_pairs:
            if self.line != first_line:
                raise _Stop(
                    ImportIssue(
                        None, None, 'a JSON file must be {"pairs": [...]}: no "pairs" found'
                    )
                )
            # One object on one line without "pairs": the first pair of a JSON Lines file.
            self.was_jsonl = True
            return
        self._end()

    def _pairs(self) -> Iterator[RawRecord | ImportIssue]:
        if self._peek() == "]":
            self._advance(self.pos + 1)
            return
        while True:
            self._skip_ws()
            line, start = self.line, self.dropped + self.pos
            value = self._value()
            if self._longer_than_a_record(start - self.dropped):
                yield ImportIssue(line, None, record_too_long())
            else:
                yield RawRecord(line, value)
            if self._expect(",]", "',' or ']' after a pair") == "]":
                return

    def _longer_than_a_record(self, start: int) -> bool:
        """Whether the value just read, from ``start`` in the buffer, is over the JSONL limit
        (counted in UTF-8 bytes, as a line is; only a long text needs encoding to tell)."""
        chars = self.pos - start
        if chars * 4 <= MAX_RECORD_BYTES:
            return False
        return (
            chars > MAX_RECORD_BYTES or len(self.buf[start : self.pos].encode()) > MAX_RECORD_BYTES
        )

    def _end(self) -> None:
        if self._peek():
            raise _Stop(self._issue("unexpected text after the end of the JSON document", self.pos))
