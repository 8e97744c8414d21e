"""The client's pure parts: the wait Retry-After asks for, bounded; the plain progress bar;
a name a server gives that would lead out of the download folder."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from arbiter_client.errors import IntegrityError, error_for
from arbiter_client.files import safe_destination
from arbiter_client.progress import _PlainBar
from arbiter_client.transport import MAX_RETRY_WAIT_S, retry_after_seconds


@pytest.mark.parametrize(("header", "low", "high"), [("3", 3, 3), ("0", 0, 0), ("9999", 60, 60)])
def test_retry_after_in_seconds_is_honoured_up_to_the_bound(header, low, high):
    assert low <= retry_after_seconds(header, attempt=0) <= high


def test_retry_after_as_an_http_date():
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 15 <= retry_after_seconds(when, attempt=0) <= 20


@pytest.mark.parametrize("header", [None, "", "soon"])
def test_no_usable_retry_after_backs_off_exponentially(header):
    assert 0.5 <= retry_after_seconds(header, attempt=0) <= 1
    assert 4 <= retry_after_seconds(header, attempt=3) <= 8
    assert retry_after_seconds(header, attempt=30) <= MAX_RETRY_WAIT_S


def test_the_plain_bar_draws_percent_and_status():
    stream = io.StringIO()
    bar = _PlainBar("import", stream)
    bar.update_to(50, "running")
    bar.close()
    assert "import [###############---------------]  50% running" in stream.getvalue()


def test_a_file_name_leading_out_of_the_folder_is_refused(tmp_path):
    with pytest.raises(IntegrityError, match="outside"):
        safe_destination(tmp_path, "../../etc/passwd")
    assert safe_destination(tmp_path, "data/test.parquet") == (tmp_path / "data/test.parquet")


def test_an_error_names_the_fields_and_the_detail():
    error = error_for(400, {"name": ["Too long."], "detail": "name: Too long."}, "POST", "/x")
    assert error.fields == {"name": ["Too long."]}
    assert "name: Too long." in str(error)
