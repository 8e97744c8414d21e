"""A pytest plugin loaded before pytest-django sets Django up (``-p`` in pyproject), so the
suite runs with ``ARBITER_ENV=test``: eager Celery tasks, fast password hashing. What the
platform keeps under ``var/`` (the file-system broker's folders, media, checkpoints) goes to
a folder of this test session instead, removed at its end, so the suite writes nothing into
the checkout; the workers and servers the tests start inherit it."""

from __future__ import annotations

import os
import shutil
import tempfile

os.environ.setdefault("ARBITER_ENV", "test")

_SESSION_VAR_DIR = None
if "ARBITER_VAR_DIR" not in os.environ:
    _SESSION_VAR_DIR = tempfile.mkdtemp(prefix="arbiter-tests-var-")
    os.environ["ARBITER_VAR_DIR"] = _SESSION_VAR_DIR


def pytest_unconfigure(config) -> None:
    if _SESSION_VAR_DIR is not None:
        shutil.rmtree(_SESSION_VAR_DIR, ignore_errors=True)
