"""client/README.md's whole loop, run as written against a live gunicorn: import, a filter
run, three scripted annotators, agreement, a release published, downloaded with its hashes
checked and opened with datasets."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from annotation.models import Release, Vote
from tests.client.conftest import text_pairs, token_for, write_pairs
from tests.live_gunicorn import ROOT

README = ROOT / "client" / "README.md"


def whole_loop_code() -> str:
    """The first Python block under "## The whole loop"."""
    section = README.read_text().split("## The whole loop", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "client/README.md has no python block under 'The whole loop'"
    return found.group(1)


def test_the_whole_loop_is_about_fifteen_lines():
    lines = [line for line in whole_loop_code().splitlines() if line.strip()]
    assert len(lines) <= 16


def test_the_readme_loop_runs_as_written(
    live_server_for, project, carol, annotator_tokens, heuristic_judge, tmp_path
):
    server = live_server_for()
    pairs = write_pairs(tmp_path / "pairs.jsonl", text_pairs(6))
    env = {
        **os.environ,
        "ARBITER_URL": server.url,
        "ARBITER_TOKEN": token_for(carol),
        "ARBITER_PROJECT": project.slug,
        "ARBITER_PAIRS": str(pairs),
        "ARBITER_ANNOTATOR_TOKENS": ",".join(annotator_tokens),
    }
    run = subprocess.run(
        [sys.executable, "-c", whole_loop_code()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout + run.stderr + server.log()
    assert "alpha:" in run.stdout
    assert "release build" in run.stderr  # the jobs' progress bars
    assert "100%" in run.stderr
    assert "DatasetDict" in run.stdout  # open_release printed the release's splits
    release = Release.objects.get(project=project, version="1.0.0")
    assert release.status == Release.Status.PUBLISHED
    assert (tmp_path / "release-1.0.0" / "manifest.json").is_file()
    assert Vote.objects.filter(assignment__pair__project=project).count() > 0
