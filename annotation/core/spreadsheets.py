"""CSV downloads for spreadsheets, with formula injection neutralised (OWASP "CSV Injection").

A text cell a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@`` or
their full-width forms, a tab or a carriage return, after any leading whitespace: spreadsheets
skip the spaces before a formula) gets a leading apostrophe, so it shows as text; numbers stay
numbers, a negative one included. ``csv_response`` builds a small file in memory (a chart's
numbers); ``csv_stream_response`` writes a large one row by row (a release's pairs).
"""

from __future__ import annotations

import csv
import numbers
import re
from collections.abc import Iterable, Iterator, Sequence

from django.http import HttpResponse, StreamingHttpResponse

CSV_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
CSV_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def csv_cell(cell: object) -> object:
    """The value to write for ``cell``: "" for None, numbers as they are, text defused."""
    if cell is None:
        return ""
    if isinstance(cell, numbers.Number):
        return cell
    text = str(cell)
    if text.startswith(CSV_FORMULA_PREFIXES) or text.lstrip().startswith(CSV_FORMULA_PREFIXES):
        return "'" + text
    return text


class _Line:
    """A file-like sink that hands back what ``csv.writer`` writes, one row at a time."""

    def write(self, value: str) -> str:
        return value


def csv_lines(header: Sequence[object], rows: Iterable[Sequence[object]]) -> Iterator[str]:
    """The CSV text of ``header`` and ``rows``, one line per row, each cell through
    ``csv_cell``; ``rows`` is consumed lazily."""
    writer = csv.writer(_Line())
    yield writer.writerow([csv_cell(cell) for cell in header])
    for row in rows:
        yield writer.writerow([csv_cell(cell) for cell in row])


def _attachment(response: HttpResponse | StreamingHttpResponse, filename: str) -> None:
    if not CSV_FILENAME.fullmatch(filename):
        raise ValueError(f"filename: {filename!r} may hold only letters, digits, '.', '_' and '-'")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'


def csv_response(
    filename: str, header: Sequence[object], rows: Iterable[Sequence[object]]
) -> HttpResponse:
    """A small CSV download, built in memory."""
    response = HttpResponse(csv_lines(header, rows), content_type="text/csv; charset=utf-8")
    _attachment(response, filename)
    return response


def csv_stream_response(
    filename: str, header: Sequence[object], rows: Iterable[Sequence[object]]
) -> StreamingHttpResponse:
    """A CSV download written row by row as the client reads it; ``rows`` may be a generator
    over a database cursor or a file, so the whole table is never in memory."""
    response = StreamingHttpResponse(
        csv_lines(header, rows), content_type="text/csv; charset=utf-8"
    )
    _attachment(response, filename)
    return response
