"""Imports that go wrong (docs/import-format.md, "All or nothing: errors"; docs/operations.md,
"Stalled imports"): hostile input is a line error and never a 500 or a traceback, uploaded files
never outlive their job, a lost database connection is one clear line on the command line, and
an import whose worker was killed is resumed and imports every pair exactly once."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from annotation.imports import importer, parse, validate
from annotation.imports import services as jobs
from annotation.imports.errors import ImportFailed
from annotation.imports.importer import pairs_import
from annotation.imports.services import import_job_submit, import_jobs_resume_stalled
from annotation.models import ImportJob, Pair, Role
from tests.annotation.imports.conftest import (
    assert_nothing_imported,
    import_pairs_process,
    jsonl_bytes,
    leftover_uploads,
    text_pair,
    upload,
    wait_for_uploads_removed,
    write_jsonl,
)
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

# Far deeper than Python's JSON decoder can follow (its recursion limit is about 1,000).
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_LINE = f'{{"id": "deep", "prompt_metadata": {{"x": {DEEP}}}}}'
TOO_DEEP = "line 2: not valid JSON: nested too deeply to read"
NUL_PATH = "line 1, field response_a.response_content[0]: the image path contains a control"


def nul_path_pair() -> dict:
    pair = text_pair("nul")
    pair["response_a"]["response_content"] = [["image", "images/a\x00.png"]]
    return pair


def refused(project, path) -> list[str]:
    with pytest.raises(ImportFailed) as info:
        pairs_import(project=project, source=path)
    return info.value.lines()


# Hostile input -------------------------------------------------------------------------


def test_deeply_nested_json_line_is_a_line_error(project, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair("ok"), DEEP_LINE, text_pair("ok2")])
    assert refused(project, path) == [TOO_DEEP]
    assert_nothing_imported(project)


def test_deeply_nested_pair_in_a_json_document_names_its_line(project, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(f'{{"pairs": [{{"id": "ok"}},\n{DEEP_LINE}]}}')
    assert refused(project, path)[-1] == f"{TOO_DEEP} (column 1)"
    assert_nothing_imported(project)


def test_values_kept_as_they_are_may_not_nest_deeper_than_the_limit(project, tmp_path):
    nested = {}  # MAX_JSON_DEPTH levels of objects
    for _ in range(validate.MAX_JSON_DEPTH - 1):
        nested = {"x": nested}
    shallow = text_pair("shallow", prompt_metadata=nested)
    deep = text_pair("deep", prompt_metadata={"x": nested}, notes=[[[nested]]])
    path = write_jsonl(tmp_path / "p.jsonl", [shallow, deep])
    assert refused(project, path) == [
        f"line 2, field prompt_metadata: is nested more than {validate.MAX_JSON_DEPTH} levels deep",
        f"line 2, field notes: is nested more than {validate.MAX_JSON_DEPTH} levels deep",
    ]


def test_votes_and_labels_that_are_lists_are_named_by_type(likert_project, tmp_path):
    pair = text_pair("p", human_annotations=[[[6]]], chosen={"side": "A"})
    lines = refused(likert_project, write_jsonl(tmp_path / "p.jsonl", [pair]))
    assert lines == [
        "line 1, field human_annotations[0]: a list is not on this project's likert6 scale "
        "(1 to 6)",
        "line 1, field chosen: an object is not one of A, B or tie",
    ]


def test_an_integer_too_long_to_convert_is_a_line_error(project, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair("ok"), '{"id": ' + "7" * 5000 + "}"])
    assert refused(project, path) == ["line 2: not valid JSON: a number has more than 4300 digits"]


@pytest.mark.parametrize("character", ["\x00", "\x1b", "\n"])
def test_control_character_in_an_image_path_is_a_field_error(project, tmp_path, character):
    pair = nul_path_pair()
    pair["response_a"]["response_content"] = [["image", f"images/a{character}.png"]]
    lines = refused(project, write_jsonl(tmp_path / "p.jsonl", [pair]))
    assert lines == [f"{NUL_PATH} character (U+{ord(character):04X})"]


def test_pair_over_the_record_limit_is_refused_in_json_as_in_jsonl(project, tmp_path, monkeypatch):
    monkeypatch.setattr(parse, "MAX_RECORD_BYTES", 2000)
    big = text_pair("big", criterion="é" * 1200)  # 2,400 bytes of UTF-8 in 1,200 characters
    pairs = [text_pair("ok"), big, text_pair("ok2", prompt_metadata={"x": "y"})]
    jsonl = write_jsonl(tmp_path / "p.jsonl", pairs)
    document = tmp_path / "p.json"
    document.write_text('{"pairs": [\n' + ",\n".join(jsonl.read_text().splitlines()) + "\n]}")
    message = "the pair is longer than 2,000 bytes"
    assert refused(project, jsonl) == [f"line 2: {message}"]
    assert refused(project, document) == [f"line 3: {message}"]
    assert_nothing_imported(project)


@pytest.fixture
def likert_project(db):
    return ProjectFactory(slug="mmrb2", name="MMRB2", scale="likert6", overlap=3)


# Command line ----------------------------------------------------------------------------


def test_import_pairs_command_reports_hostile_lines(project, tmp_path, capsys):
    path = write_jsonl(tmp_path / "p.jsonl", [nul_path_pair(), DEEP_LINE])
    with pytest.raises(CommandError) as info:
        call_command("import_pairs", project.slug, str(path))
    assert info.value.returncode == 1
    err = capsys.readouterr().err
    assert NUL_PATH in err
    assert TOO_DEEP in err
    assert_nothing_imported(project)
    assert leftover_uploads() == []


@pytest.mark.django_db(transaction=True)
def test_import_pairs_process_prints_hostile_lines_without_a_traceback(tmp_path):
    project = ProjectFactory(slug="cli-hostile")
    path = write_jsonl(tmp_path / "p.jsonl", [nul_path_pair(), DEEP_LINE])
    process = import_pairs_process(project.slug, path)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    assert NUL_PATH in stderr
    assert TOO_DEEP in stderr
    assert "Traceback" not in stderr
    assert not Pair.objects.filter(project=project).exists()


# Upload page and API: no 500, and the uploads are removed ---------------------------------


def hostile_file() -> bytes:
    return jsonl_bytes([nul_path_pair(), DEEP_LINE])


def test_hostile_upload_shows_line_errors_on_the_page(
    client_for, carol, project, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # the job's task, run here
        response = client_for(carol).post(
            reverse("imports", args=[project.slug]), {"file": upload("p.jsonl", hostile_file())}
        )
    assert response.status_code == 302
    job = ImportJob.objects.get(project=project)
    assert job.status == "failed"
    page = client_for(carol).get(response.url).content.decode()
    assert "nested too deeply to read" in page
    assert "control character (U+0000)" in page
    assert_nothing_imported(project)
    assert leftover_uploads() == []


def test_hostile_upload_is_a_400_on_the_api(api_for, carol, project):
    response = api_for(carol).post(
        f"/api/v1/projects/{project.slug}/imports/",
        {"file": upload("p.jsonl", hostile_file())},
        format="multipart",
    )
    assert response.status_code == 400
    errors = [(e["line"], e["field"]) for e in response.json()["errors"]]
    assert errors == [(1, "response_a.response_content[0]"), (2, None)]
    assert leftover_uploads() == []


def crash_imports(monkeypatch):
    """Makes checking a pair raise, as a bug in the importer would."""

    def crash(*args, **kwargs):
        raise RuntimeError("a bug in the importer")

    monkeypatch.setattr(importer, "pair_spec", crash)


def test_upload_is_removed_when_the_import_crashes_on_the_page(
    client_for, carol, project, monkeypatch, django_capture_on_commit_callbacks
):
    crash_imports(monkeypatch)
    # The page answers before the import runs; the crash is the job's task's, not the page's.
    with django_capture_on_commit_callbacks() as queued:
        response = client_for(carol).post(
            reverse("imports", args=[project.slug]),
            {"file": upload("p.jsonl", jsonl_bytes([text_pair("p1")]))},
        )
    assert response.status_code == 302
    with pytest.raises(RuntimeError):
        queued[0]()  # the job's task
    job = ImportJob.objects.get(project=project)
    assert (job.status, job.errors[0]["message"]) == (
        "failed",
        "The import stopped on an internal error (RuntimeError).",
    )
    assert leftover_uploads() == []


def test_upload_is_removed_when_the_import_crashes_on_the_api(api_for, carol, project, monkeypatch):
    crash_imports(monkeypatch)
    with pytest.raises(RuntimeError):
        api_for(carol).post(
            f"/api/v1/projects/{project.slug}/imports/",
            {"file": upload("p.jsonl", jsonl_bytes([text_pair("p1")]))},
            format="multipart",
        )
    assert leftover_uploads() == []


def test_upload_is_removed_when_the_import_task_fails(
    carol, project, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from annotation.tasks import import_run

    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    with django_capture_on_commit_callbacks(execute=False):
        job = import_job_submit(
            project=project, user=carol, upload=upload("big.jsonl", jsonl_bytes([text_pair("p")]))
        )
    assert len(leftover_uploads()) == 1
    crash_imports(monkeypatch)
    result = import_run.apply(args=[job.pk], throw=False)  # as a worker runs it, on_failure too
    assert isinstance(result.result, RuntimeError)
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.errors[0]["message"] == "The import stopped on an internal error (RuntimeError)."
    assert leftover_uploads() == []


def test_upload_is_removed_when_saving_it_fails(carol, project, monkeypatch):
    archive = upload("media.zip", b"PK\x05\x06" + b"\x00" * 18)

    def disk_full():
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(archive, "chunks", disk_full)
    with pytest.raises(OSError, match="No space left on device"):
        import_job_submit(
            project=project,
            user=carol,
            upload=upload("p.jsonl", jsonl_bytes([text_pair("p")])),
            archive=archive,
        )
    assert not ImportJob.objects.exists()
    assert leftover_uploads() == []


# The database goes away ------------------------------------------------------------------


def _backend_in_a_long_transaction() -> int | None:
    """The import's session: the one other session of the test database that has been in
    one transaction for a while (Django's own queries commit at once)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start < now() - interval '0.5 seconds'"
        )
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.mark.django_db(transaction=True)
def test_import_pairs_reports_a_lost_database_in_one_line(tmp_path):
    project = ProjectFactory(slug="cli-lost")
    path = write_jsonl(tmp_path / "p.jsonl", [text_pair(f"p{i}") for i in range(100_000)])
    process = import_pairs_process(project.slug, path)
    deadline = time.monotonic() + 60
    while (pid := _backend_in_a_long_transaction()) is None:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert "The database connection was lost during the import; nothing was imported." in stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert not Pair.objects.filter(project=project).exists()


# Stalled imports -------------------------------------------------------------------------


def test_stalled_job_is_resumed_once(carol, project, settings, django_capture_on_commit_callbacks):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    settings.ARBITER_STALLED_AFTER_S = 60
    data = jsonl_bytes([text_pair(f"p{i}") for i in range(3)])
    with django_capture_on_commit_callbacks(execute=False):  # the task was never delivered
        stalled = import_job_submit(project=project, user=carol, upload=upload("a.jsonl", data))
        recent = import_job_submit(project=project, user=carol, upload=upload("b.jsonl", data))
    old = timezone.now() - timedelta(seconds=61)
    ImportJob.objects.filter(pk=stalled.pk).update(status="running", progress_at=old)
    assert import_jobs_resume_stalled() == [stalled.pk]  # tasks run eagerly here
    stalled.refresh_from_db()
    recent.refresh_from_db()
    assert (stalled.status, stalled.created_pairs) == ("succeeded", 3)
    assert recent.status == "pending"
    assert import_jobs_resume_stalled() == []


def test_a_resumed_job_is_not_resumed_again_while_it_runs(project, settings, monkeypatch):
    settings.ARBITER_STALLED_AFTER_S = 60
    old = timezone.now() - timedelta(seconds=61)
    job = ImportJob.objects.create(
        project=project, status="running", progress_at=old, upload_path=".uploads/x/pairs-a.jsonl"
    )
    queued = []
    monkeypatch.setattr(jobs, "_enqueue", queued.append)  # the task is slow to start
    assert import_jobs_resume_stalled() == [job.pk]
    assert import_jobs_resume_stalled() == []  # the next beat
    assert queued == [job.pk]


@pytest.mark.redis
@pytest.mark.timeout(240)
@pytest.mark.django_db(transaction=True)
def test_import_whose_worker_was_killed_is_resumed(celery_worker_process, settings):
    from config.celery import app

    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10
    project = ProjectFactory(slug="killed-import")
    curator = UserFactory(username="curator-k")
    MembershipFactory(project=project, user=curator, role=Role.CURATOR)
    count = 60_000
    data = jsonl_bytes([text_pair(f"p{i}") for i in range(count)])
    first = celery_worker_process(queues="imports", concurrency=1)
    job = import_job_submit(project=project, user=curator, upload=upload("big.jsonl", data))
    try:
        deadline = time.monotonic() + 60
        while not (job.status == "running" and 0 < job.bytes_done < job.bytes_total):
            assert time.monotonic() < deadline, first.log()
            assert not job.finished, first.log()
            time.sleep(0.05)
            job.refresh_from_db()
        first.kill()  # mid-import: its transaction dies with it
        job.refresh_from_db()
        assert job.status == "running"
        assert not Pair.objects.filter(project=project).exists()

        # The killed worker's task is not delivered again for an hour (CELERY_VISIBILITY_S):
        # the periodic task finds the job stalled and queues it again.
        celery_worker_process(
            queues="imports", concurrency=1, extra_env={"ARBITER_STALLED_AFTER_S": "1"}
        )
        time.sleep(1.5)
        app.send_task("annotation.imports_resume_stalled")
        deadline = time.monotonic() + 120
        while not job.finished:
            assert time.monotonic() < deadline, "the stalled import was not resumed"
            time.sleep(0.25)
            job.refresh_from_db()
    finally:
        _forget_unacknowledged_tasks(app)
    assert job.status == "succeeded", job.errors
    assert job.created_pairs == count
    assert Pair.objects.filter(project=project).count() == count
    assert Pair.objects.filter(project=project).values("external_id").distinct().count() == count
    wait_for_uploads_removed()


def _forget_unacknowledged_tasks(app) -> None:
    """Drops the killed worker's unacknowledged message, which Redis would otherwise hand
    to some later test's worker once the visibility timeout has passed."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        channel.client.delete(channel.unacked_key, channel.unacked_index_key)
