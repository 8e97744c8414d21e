"""The repository stands on its own: code, tests and docs cite docs/, never files outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"DESIGN\.md|STYLE\.md|\.\./shared")


def test_nothing_cites_files_outside_the_repository():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    offenders = [
        f"{name}:{number}"
        for name in tracked
        if name.endswith((".py", ".md", ".html", ".js", ".toml"))
        and name != "tests/test_repository.py"
        and not name.startswith("fixtures/")
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert offenders == []
