"""The repository stands on its own: code, tests and docs cite docs/, never files outside it."""

from __future__ import annotations

import io
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


def test_the_suite_keeps_var_outside_the_checkout(settings):
    """tests/settings_env.py moves ``var/`` (the file-system broker's folders, media,
    checkpoints, releases) to a folder of the test session."""
    places = [
        settings.VAR_DIR,
        settings.MEDIA_ROOT,
        settings.ARBITER_CHECKPOINT_ROOT,
        settings.ARBITER_RELEASE_ROOT,
        *(
            settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(key, "/")
            for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
        ),
    ]
    inside = [str(place) for place in places if Path(place).resolve().is_relative_to(ROOT)]
    assert inside == []


def test_the_migrations_match_the_models(db):
    """What ``makemigrations --check`` says before a commit: no model change lacks its
    migration (exit code 1 and the missing operations otherwise)."""
    from django.core.management import call_command

    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "No changes detected"
