"""A pytest plugin loaded before pytest-django sets Django up (``-p`` in pyproject), so the
suite runs with ``ARBITER_ENV=test``: eager Celery tasks, fast password hashing."""

from __future__ import annotations

import os

os.environ.setdefault("ARBITER_ENV", "test")
