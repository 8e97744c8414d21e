"""The audit log is append-only in PostgreSQL itself: UPDATE and DELETE are refused whatever
sends them (raw SQL included), TRUNCATE unless a superuser's session asks for it, migrating
back refuses to drop it (docs/audit.md, "Append-only"), and deleting a project or an account
leaves their events as they were. ``audit_check`` tells whether the role could get past that
("Hardening")."""

from __future__ import annotations

import importlib
import io
import uuid
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.db.migrations.exceptions import IrreversibleError

from annotation.audit.services import audit_record
from annotation.models import AuditEvent, Project

pytestmark = pytest.mark.django_db


@pytest.fixture
def event(project, carol):
    return audit_record(
        actor=carol,
        project=project,
        action="project.paused",
        target=project,
        before={"paused": False},
        after={"paused": True},
    )


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE annotation_auditevent SET actor_label = 'mallory' WHERE id = %s",
        "DELETE FROM annotation_auditevent WHERE id = %s",
    ],
    ids=["update", "delete"],
)
def test_raw_sql_cannot_change_or_delete_an_event(event, statement):
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement, [event.pk])
    event.refresh_from_db()
    assert event.actor_label == "carol"


def test_the_orm_cannot_either(event):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(action="project.created")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).delete()
    assert AuditEvent.objects.get(pk=event.pk).action == "project.paused"


def test_truncate_is_refused_unless_the_session_asks(event):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL arbiter.audit_truncate = 'off'")
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            cursor.execute("TRUNCATE annotation_auditevent")
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_deleting_the_project_and_the_actor_keeps_their_events(event, project, carol):
    project.delete()
    carol.delete()
    event.refresh_from_db()
    assert (event.project_slug, event.actor_label) == ("demo", "carol")
    assert not Project.objects.filter(slug="demo").exists()


@pytest.fixture
def app_role(event):
    """A role like the one docs/audit.md ("Hardening") asks the web and worker processes to
    run as: it neither owns the table nor is superuser (dropped with the test's transaction)."""
    name = f"audit_app_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE ROLE {name} NOSUPERUSER")
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {name}")
        cursor.execute(f"GRANT SELECT, INSERT ON annotation_auditevent TO {name}")
        cursor.execute(f"GRANT USAGE ON SEQUENCE annotation_auditevent_id_seq TO {name}")
    return name


@contextmanager
def acting_as(role):
    with connection.cursor() as cursor:
        cursor.execute(f"SET ROLE {role}")
        try:
            yield cursor
        finally:
            cursor.execute("RESET ROLE")


def test_truncate_needs_a_superuser_even_with_the_setting(event, app_role):
    with connection.cursor() as cursor:
        cursor.execute(f"GRANT TRUNCATE ON annotation_auditevent TO {app_role}")
    with acting_as(app_role) as cursor, transaction.atomic():
        cursor.execute("SET LOCAL arbiter.audit_truncate = 'on'")
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            cursor.execute("TRUNCATE annotation_auditevent")
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_a_superuser_with_the_setting_may_empty_it(event):
    # The one way out, for a test or scratch database (``manage.py flush``).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL arbiter.audit_truncate = 'on'")
        cursor.execute("TRUNCATE annotation_auditevent")
        assert not AuditEvent.objects.exists()
        transaction.set_rollback(True)
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def _going_back():
    return importlib.import_module(
        "annotation.migrations.0034_audit_truncate_superuser_only"
    ).scratch_only


def test_migrating_back_refuses_to_drop_the_log(event):
    schema_editor = SimpleNamespace(connection=connection)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL arbiter.audit_truncate = 'off'")
        with pytest.raises(IrreversibleError, match="would drop the audit log"):
            _going_back()(None, schema_editor)
        cursor.execute("SET LOCAL arbiter.audit_truncate = 'on'")
        _going_back()(None, schema_editor)  # a superuser on a scratch database may


def test_migrating_back_is_refused_to_a_role_that_is_not_superuser(event, app_role):
    schema_editor = SimpleNamespace(connection=connection)
    with acting_as(app_role) as cursor, transaction.atomic():
        cursor.execute("SET LOCAL arbiter.audit_truncate = 'on'")
        with pytest.raises(IrreversibleError, match="would drop the audit log"):
            _going_back()(None, schema_editor)


def test_audit_check_passes_for_a_role_that_only_reads_and_adds(event, app_role):
    out = io.StringIO()
    with acting_as(app_role):
        call_command("audit_check", stdout=out)
        # What docs/audit.md grants is enough to write the log.
        added = AuditEvent.objects.create(action="project.paused", target_type="project")
        assert AuditEvent.objects.filter(pk=added.pk).exists()
    assert "append-only for this role" in out.getvalue()


def test_audit_check_fails_for_the_owner_a_superuser_or_truncate(event, app_role):
    with pytest.raises(CommandError) as superuser:
        call_command("audit_check")
    assert "is a superuser" in str(superuser.value)
    with connection.cursor() as cursor:
        cursor.execute(f"GRANT TRUNCATE ON annotation_auditevent TO {app_role}")
        cursor.execute(f"ALTER TABLE annotation_auditevent OWNER TO {app_role}")
    with acting_as(app_role), pytest.raises(CommandError) as owner:
        call_command("audit_check")
    assert f"{app_role} owns annotation_auditevent" in str(owner.value)


def test_audit_check_notices_a_disabled_trigger(event, app_role):
    with connection.cursor() as cursor:
        cursor.execute(
            "ALTER TABLE annotation_auditevent DISABLE TRIGGER annotation_auditevent_no_truncate"
        )
    with acting_as(app_role), pytest.raises(CommandError, match="no_truncate is missing"):
        call_command("audit_check")
