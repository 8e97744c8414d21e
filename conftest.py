"""Loaded before Django is set up: the test suite runs with ARBITER_ENV=test."""

import os

os.environ.setdefault("ARBITER_ENV", "test")
