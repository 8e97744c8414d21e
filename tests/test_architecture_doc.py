"""docs/architecture.md stays true: every package its map of the code names exists, every
package of ``annotation`` and ``judges`` is named there, and the layers it draws are the ones
``lint-imports`` holds. A package added, moved or removed without its line fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
# Django's own folders, named in the map's "top level" row: not feature packages.
TOP_LEVEL = {"api", "management", "migrations", "templatetags"}


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## Apps and the direction of dependencies\n")
    return text[start : text.index("\n## ", start + 1)]


def _subpackages(top: str) -> set[str]:
    return {
        init.parent.name
        for init in (ROOT / top).glob("*/__init__.py")
        if init.parent.name not in TOP_LEVEL
    }


def test_the_map_has_a_row_for_every_annotation_package_and_no_other():
    rows = re.findall(r"^\| `annotation/([a-z_]+)/` \|", _section(), flags=re.M)
    assert len(rows) == len(set(rows))
    assert set(rows) == _subpackages("annotation")
    top_row = next(line for line in _section().splitlines() if "`annotation/` top level" in line)
    for folder in TOP_LEVEL:
        assert (ROOT / "annotation" / folder).is_dir()
        assert f"`{folder}/" in top_row


def test_the_map_has_a_line_for_every_judges_package_and_no_other():
    named = set(re.findall(r"^judges/([a-z_]+)/", _section(), flags=re.M))
    assert named == _subpackages("judges")


def _annotation_layers_contract() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [
        c
        for c in contracts
        if c["name"] == "annotation: entry points above features above the kernel"
    ]
    return contract["layers"]


def test_the_layers_drawn_are_the_layers_lint_imports_holds():
    """The map draws annotation's layers top to bottom in a code block; lint-imports holds the
    contract in pyproject.toml. The two say the same, in the same order."""
    block = _section().split("```\n", 2)[1]
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]
    held = [
        " ".join(part.removeprefix("annotation.") for part in layer.split())
        for layer in _annotation_layers_contract()
    ]
    assert drawn == held
    # every feature package sits in one layer
    placed = [name for layer in held for name in re.split(r" [|:] ", layer)]
    assert len(placed) == len(set(placed))
    assert _subpackages("annotation") <= set(placed)
