"""Judge tests keep reward-model checkpoints in a folder of their own, set as the root."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def checkpoint_root(settings, tmp_path):
    """ARBITER_CHECKPOINT_ROOT for this test: an empty folder under its tmp_path."""
    root = tmp_path / "checkpoints"
    root.mkdir()
    settings.ARBITER_CHECKPOINT_ROOT = root
    return root
