"""CSV downloads with formula injection neutralised (annotation/core/spreadsheets.py)."""

from __future__ import annotations

import csv
import io

import pytest

from annotation.core.spreadsheets import csv_response, csv_stream_response

HOSTILE_ROWS = [
    ['=HYPERLINK("http://evil")', -0.25, None],
    ["+cmd", "-1+2", 3],
    ["@SUM(A1)", "\tx", "\rx"],
    [" =1+1", "\u00a0\n @A1", "\uff1dSUM(A1)"],
    ["alice", 0.5, "a=b"],
]
DEFUSED = [
    ["'=annotator", "alpha", "note"],
    ['\'=HYPERLINK("http://evil")', "-0.25", ""],
    ["'+cmd", "'-1+2", "3"],
    ["'@SUM(A1)", "'\tx", "'\rx"],
    ["' =1+1", "'\u00a0\n @A1", "'\uff1dSUM(A1)"],
    ["alice", "0.5", "a=b"],
]


def parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_neutralises_formulas_in_text_but_keeps_numbers_numbers():
    response = csv_response("agreement-demo.csv", ["=annotator", "alpha", "note"], HOSTILE_ROWS)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="agreement-demo.csv"'
    assert parse(response.content.decode()) == DEFUSED


def test_a_streamed_csv_defuses_alike_and_reads_its_rows_lazily():
    pulled = []

    def rows():
        for row in HOSTILE_ROWS:
            pulled.append(row)
            yield row

    response = csv_stream_response("demo-1.0.0.csv", ["=annotator", "alpha", "note"], rows())
    assert response.streaming
    assert pulled == []  # nothing is read before the client reads
    chunks = [chunk.decode() for chunk in response.streaming_content]
    assert len(chunks) == len(HOSTILE_ROWS) + 1  # one line a chunk, the header first
    assert parse("".join(chunks)) == DEFUSED
    assert response["Content-Disposition"] == 'attachment; filename="demo-1.0.0.csv"'


def test_cells_with_newlines_and_quotes_round_trip():
    rows = [["line one\nline two", 'she said "hi", twice']]
    response = csv_stream_response("x.csv", ["a", "b"], rows)
    text = b"".join(response.streaming_content).decode()
    assert parse(text) == [["a", "b"], rows[0]]


@pytest.mark.parametrize("filename", ['a".csv', "../a.csv", "a b.csv", "", "x\r\nSet-Cookie: a"])
@pytest.mark.parametrize("make", [csv_response, csv_stream_response])
def test_csv_filename_must_be_plain(make, filename):
    with pytest.raises(ValueError, match="filename"):
        make(filename, ["a"], [])
