"""Imports made with ``manage.py import_pairs`` appear on the Import page like uploads, with
their outcome; they are never resumed by the stalled-import sweep (there is no upload to
resume from)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from annotation.imports.services import import_jobs_resume_stalled
from annotation.models import ImportJob, Membership, Role
from tests.annotation.imports.conftest import import_pairs_process, text_pair, write_jsonl
from tests.factories import ProjectFactory, UserFactory


def import_page(client, project) -> str:
    response = client.get(reverse("imports", args=[project.slug]))
    assert response.status_code == 200
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.mark.django_db(transaction=True)
def test_a_command_line_import_is_listed_on_the_import_page(client, tmp_path):
    project = ProjectFactory(slug="cli-listed")
    curator = UserFactory(username="carol")
    Membership.objects.create(project=project, user=curator, role=Role.CURATOR)
    path = write_jsonl(tmp_path / "from-the-shell.jsonl", [text_pair(f"p{i}") for i in range(3)])
    process = import_pairs_process(project.slug, path)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    client.force_login(curator)
    row = import_page(client, project).split("<td>from-the-shell.jsonl</td>", 1)
    assert len(row) == 2, "the command's import is listed"
    assert row[0].rsplit("<tr>", 1)[1].endswith("<td>command line</td> ")
    assert "Succeeded" in row[1].split("</tr>", 1)[0]
    assert '<td class="num">3</td>' in row[1].split("</tr>", 1)[0]


@pytest.mark.django_db
def test_a_refused_command_line_import_shows_its_errors(client_for, carol, project, tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [text_pair("p1"), {"id": "p2"}])
    with pytest.raises(CommandError):
        call_command("import_pairs", project.slug, str(path))
    job = ImportJob.objects.get(project=project)
    assert job.status == ImportJob.Status.FAILED
    assert job.created_by is None
    body = re.sub(
        r"\s+",
        " ",
        client_for(carol)
        .get(f"{reverse('imports', args=[project.slug])}?job={job.pk}")
        .content.decode(),
    )
    assert "Import of bad.jsonl" in body
    assert "line 2" in body


@pytest.mark.django_db
def test_an_interrupted_command_leaves_its_job_failed(project, tmp_path, monkeypatch):
    from annotation.imports import services as jobs

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "pairs_import", interrupted)
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair("p1")])
    with pytest.raises(KeyboardInterrupt):
        call_command("import_pairs", project.slug, str(path))
    job = ImportJob.objects.get(project=project)
    assert job.status == ImportJob.Status.FAILED
    assert job.errors[0]["message"] == "The command stopped before the import ended."


@pytest.mark.django_db
def test_the_stalled_sweep_leaves_command_line_jobs_alone(project, settings, monkeypatch):
    from annotation.imports import services as jobs

    settings.ARBITER_STALLED_AFTER_S = 60
    ImportJob.objects.create(
        project=project,
        filename="long.jsonl",
        status=ImportJob.Status.RUNNING,
        progress_at=timezone.now() - timedelta(hours=1),
    )
    monkeypatch.setattr(jobs, "_enqueue", lambda job_id: pytest.fail("must not be resumed"))
    assert import_jobs_resume_stalled() == []
