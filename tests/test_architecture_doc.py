"""docs/architecture.md stays true: every package it names in its map of the code exists, and
every package of ``annotation`` and ``judges`` is named there, so a package added, moved or
removed without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
# Folders that are Django's conventions, not packages of our own making.
CONVENTIONS = {"migrations", "management/commands", "templatetags"}


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _packages(top: str) -> set[str]:
    """Every package under ``top`` (a folder with ``__init__.py``), as ``top/a/b/``."""
    return {
        f"{init.parent.relative_to(ROOT).as_posix()}/"
        for init in (ROOT / top).rglob("__init__.py")
        if init.parent != ROOT / top
        and not any(
            init.parent.relative_to(ROOT / top).as_posix().startswith(convention)
            for convention in CONVENTIONS
        )
    }


def _named(top: str) -> set[str]:
    """The folders of ``top`` the map names: ``annotation/queue/`` in the table, and
    ``judges/runs/`` at the start of a line of the judges' block (several on one line)."""
    section = _section("Apps and the direction of dependencies")
    named = set(re.findall(rf"`({top}/[a-z_/]+/)`", section))
    named |= {
        f"{top}/{name}/"
        for line in section.splitlines()
        if line.startswith(f"{top}/")
        for name in re.findall(rf"(?:^|, ){top}/([a-z_/]+)/", line)
    }
    named |= {f"{top}/{name}/" for name in re.findall(r"`([a-z_]+)/[a-z_]+\.py`", section)}
    return named


def _subpackages_named(top: str) -> set[str]:
    """Packages of ``top``'s packages (``annotation/agreement/views/``) count as named when
    their parent is: a feature's pages split into modules are the feature's own."""
    named = _named(top)
    return {
        package
        for package in _packages(top)
        if package in named or any(package.startswith(parent) for parent in named)
    }


def test_every_annotation_package_is_in_the_map_and_every_one_named_exists():
    named = {path for path in _named("annotation") if (ROOT / path).parent.exists()}
    assert not {path for path in _named("annotation") if not (ROOT / path).is_dir()}
    assert _packages("annotation") - _subpackages_named("annotation") == set()
    # the feature packages each have their own row
    rows = set(re.findall(r"^\| `(annotation/[a-z_]+/)` \|", DOC.read_text(), flags=re.M))
    features = {
        path for path in _packages("annotation") if path.count("/") == 2 and path not in named
    } - {"annotation/api/"}
    assert features <= rows
    assert {row for row in rows if not (ROOT / row).is_dir()} == set()


def test_every_judges_package_is_in_the_map_and_every_one_named_exists():
    named = _named("judges")
    assert {path for path in named if not (ROOT / path).is_dir()} == set()
    assert _packages("judges") - _subpackages_named("judges") == set()


def test_the_map_names_what_lint_imports_holds_in_order():
    """The layers contract across the annotation packages, top to bottom, is the order the
    map says it is (docs/architecture.md quotes it)."""
    contracts = (ROOT / "pyproject.toml").read_text()
    match = re.search(
        r'name = "annotation: entry points above features above the kernel"\s*\n'
        r"type = \"layers\"\s*\nlayers = \[(.*?)\]",
        contracts,
        flags=re.S,
    )
    assert match is not None, "the cross-package layers contract is missing"
    layers = re.findall(r'"([^"]+)"', match.group(1))
    section = _section("Apps and the direction of dependencies")
    for layer in layers:
        for package in re.split(r"\s*[|:]\s*", layer):
            assert f"`{package}`" in section, f"{package} is not named in the map's order"
