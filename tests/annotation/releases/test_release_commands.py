"""``manage.py create_release`` and ``verify_release`` (docs/releases.md, "Command line")."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Release
from tests.annotation.releases.conftest import CONSENSUS_VOTES, releasable_project
from tests.celery_worker import ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def filled(project, alice, bob, carol):
    releasable_project(project, alice, bob, carol)
    return project


def test_create_release_builds_publishes_and_copies_out(filled, tmp_path, capsys):
    out = tmp_path / "out"
    call_command(
        "create_release",
        "demo",
        "--version",
        "1.2.3",
        "--splits",
        "train=0.5,test=0.5",
        "--tasks",
        "code,text",
        "--ties",
        "--publish",
        "--out",
        str(out),
    )
    printed = capsys.readouterr().out
    release = Release.objects.get(project=filled, version="1.2.3")
    assert release.status == Release.Status.PUBLISHED
    assert release.selection["include_ties"]
    assert release.selection["tasks"] == ["code", "text"]
    assert f"Release demo@1.2.3 published: {release.pair_count} pairs" in printed
    assert release.manifest_sha256 in printed
    copied = out / "demo-1.2.3"
    assert json.loads((copied / "manifest.json").read_text())["splits"]
    copied_archive = (out / "demo-1.2.3.tar.gz").read_bytes()
    assert hashlib.sha256(copied_archive).hexdigest() == release.archive_sha256
    assert len(copied_archive) == release.archive_size
    call_command("verify_release", str(copied))
    call_command("verify_release", str(out / "demo-1.2.3.tar.gz"))
    assert "matches its manifest" in capsys.readouterr().out


def test_create_release_refuses_bad_input_naming_the_field(filled):
    with pytest.raises(CommandError, match=r"version: must be X\.Y\.Z"):
        call_command("create_release", "demo", "--version", "1.0")
    with pytest.raises(CommandError, match="splits: the ratios must add up to 1"):
        call_command("create_release", "demo", "--version", "1.0.0", "--splits", "a=0.5")
    with pytest.raises(CommandError, match="min_agreement: must be from 0 to 1"):
        call_command("create_release", "demo", "--version", "1.0.0", "--min-agreement", "2")
    with pytest.raises(CommandError, match="No project with slug 'nope'"):
        call_command("create_release", "nope", "--version", "1.0.0")
    call_command("create_release", "demo", "--version", "1.0.0")
    with pytest.raises(CommandError, match=r"demo has a release 1\.0\.0 already"):
        call_command("create_release", "demo", "--version", "1.0.0")
    assert not Release.objects.filter(version="1.0").exists()


def test_create_release_filters_by_criterion_and_agreement(filled):
    call_command(
        "create_release",
        "demo",
        "--version",
        "2.0.0",
        "--criterion",
        "correctness",
        "--min-agreement",
        "0.9",
        "--no-adjudicated",
    )
    release = Release.objects.get(version="2.0.0")
    rows = [json.loads(line) for line in (release.folder / "jsonl" / "test.jsonl").open()]
    assert {row["id"] for row in rows} == {"rel-01", "rel-02"}
    assert set(CONSENSUS_VOTES) > {row["id"] for row in rows}


def test_verify_release_exits_1_naming_each_file_that_differs(filled, tmp_path):
    call_command("create_release", "demo", "--version", "1.0.0")
    folder = Release.objects.get(version="1.0.0").folder
    target = folder / "jsonl" / "test.jsonl"
    data = bytearray(target.read_bytes())
    data[10] ^= 0x20
    target.write_bytes(bytes(data))
    # as a user runs it: a process, its exit code and its output
    result = subprocess.run(
        [sys.executable, "manage.py", "verify_release", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "jsonl/test.jsonl: sha256 differs from the manifest" in result.stderr
    assert "1 file differs" in result.stderr
    with pytest.raises(CommandError, match="No such file or folder"):
        call_command("verify_release", str(tmp_path / "missing.tar.gz"))


def test_the_commands_have_help():
    for command in ("create_release", "verify_release"):
        result = subprocess.run(
            [sys.executable, "manage.py", command, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0
        assert "manifest" in result.stdout
    assert (
        "--version VERSION"
        in subprocess.run(
            [sys.executable, "manage.py", "create_release", "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
