"""JSON encoded ahead of time for COPY (annotation/imports/writer.py) stays a ``str`` to the
database driver: psycopg's Python dumper writes it with ``str.encode``."""

from __future__ import annotations

from psycopg.types.string import StrDumper

from annotation.imports.writer import RawJson


def test_encoded_json_is_written_as_its_text():
    value = RawJson.of({"source": "MMRB2", "note": "é"})
    assert StrDumper(str).dump(value) == '{"source":"MMRB2","note":"é"}'.encode()
    assert StrDumper(str).dump(RawJson.of({})) == b"{}"
