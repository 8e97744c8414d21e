"""docs/scaling.md stays checkable: every benchmark it cites for a figure is a script in
benchmarks/ (a script renamed or removed fails here), and the pages an operator starts from
link to it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "scaling.md"
CITED = re.compile(r"`(?:benchmarks/)?([a-z_]+\.py)\b")


def _cited_scripts() -> set[str]:
    return set(CITED.findall(DOC.read_text()))


def test_every_benchmark_the_scaling_doc_cites_exists():
    cited = _cited_scripts()
    missing = sorted(name for name in cited if not (ROOT / "benchmarks" / name).is_file())
    assert missing == []


def test_the_scaling_doc_cites_the_benchmarks_of_each_cost():
    """A figure without its benchmark could not be measured again."""
    assert {"unit_costs.py", "annotator_load.py", "pgbouncer_load.py"} <= _cited_scripts()
    assert {"import_speed.py", "media_import.py", "judge_filter.py"} <= _cited_scripts()


def test_the_deploy_guide_and_the_readme_link_to_the_scaling_doc():
    assert "(scaling.md)" in (ROOT / "docs" / "deploy.md").read_text()
    assert "(docs/scaling.md)" in (ROOT / "README.md").read_text()


def test_the_citation_pattern_finds_a_script_and_ignores_prose():
    assert CITED.findall("`benchmarks/unit_costs.py --runs 3` and `media_range.py`") == [
        "unit_costs.py",
        "media_range.py",
    ]
    assert CITED.findall("`ARBITER_DB_POOLER` and the settings.py file") == []
