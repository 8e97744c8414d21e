"""deploy/ (docs/deploy.md): compose.yaml parses, every container runs a line of
deploy/commands.sh that docs/deploy.md documents, a worker serves each queue, and every
variable the Arbiter containers are given is one the settings read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from config.queues import QUEUES
from tests.celery_worker import database_url_for_tests

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
# The Django processes: the image's entrypoint with these first arguments.
DJANGO_PROCESSES = {"web", "worker", "beat", "migrate"}
# Read by the program a command starts, not by Django's settings.
READ_ELSEWHERE = {"WEB_CONCURRENCY": "gunicorn's number of workers"}
SETTINGS = (ROOT / "config" / "settings.py").read_text()


def _arbiter_image(service: dict) -> bool:
    return "build" in service


def _documented_commands() -> set[str]:
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("## The processes", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(deploy/commands\.sh [^`]+)`", section))


def test_every_container_of_the_image_runs_a_documented_line_of_commands_sh():
    run = {
        name: " ".join(["deploy/commands.sh", *service["command"]])
        for name, service in SERVICES.items()
        if _arbiter_image(service)
    }
    documented = _documented_commands()
    assert set(run.values()) == documented, (run, documented)
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["deploy/commands.sh"]' in dockerfile
    assert re.search(r"^USER arbiter$", dockerfile, re.M)  # never root
    assert "FROM python:3.11-slim AS app" in dockerfile


def test_one_worker_serves_each_queue():
    served = [
        service["command"][1]
        for service in SERVICES.values()
        if _arbiter_image(service) and service["command"][0] == "worker"
    ]
    assert sorted(served) == sorted(QUEUES)
    beats = [s for s in SERVICES.values() if _arbiter_image(s) and s["command"][0] == "beat"]
    assert len(beats) == 1


def test_compose_has_every_server_a_deployment_needs():
    assert SERVICES["postgres"]["image"].startswith("postgres:")
    assert SERVICES["redis"]["image"].startswith("redis:")
    assert SERVICES["pgbouncer"]["command"][0] == "pgbouncer"
    assert SERVICES["s3"]["command"][0] == "s3"
    assert "transaction" in (ROOT / "deploy" / "commands.sh").read_text()


def _unread_variables() -> set[str]:
    names = {
        name
        for service in SERVICES.values()
        if _arbiter_image(service) and service["command"][0] in DJANGO_PROCESSES
        for name in service.get("environment", {})
    }
    return {
        name
        for name in names - set(READ_ELSEWHERE)
        if not re.search(rf"""["']{name}["']""", SETTINGS)
    }


def test_every_variable_the_arbiter_containers_get_is_read_by_the_settings():
    assert _unread_variables() == set()


def test_commands_sh_is_a_valid_shell_script_that_refuses_an_unknown_process():
    script = ROOT / "deploy" / "commands.sh"
    subprocess.run(["sh", "-n", str(script)], check=True)
    refused = subprocess.run([str(script), "nginx"], capture_output=True, text=True)
    assert refused.returncode == 2
    assert "unknown process nginx" in refused.stderr


@pytest.mark.django_db(transaction=True)
def test_migrate_runs_from_commands_sh_and_makes_the_metrics_folder(tmp_path):
    """The line compose's ``migrate`` runs, on the test database (migrated: nothing to do);
    the settings refuse a metrics folder that is not there, so the command makes it."""
    folder = tmp_path / "metrics"
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        [str(ROOT / "deploy" / "commands.sh"), "migrate"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "No migrations to apply." in done.stdout
    assert folder.is_dir()
