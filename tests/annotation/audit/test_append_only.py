"""The audit log is append-only in PostgreSQL itself: UPDATE and DELETE are refused whatever
sends them (raw SQL included), TRUNCATE unless the session asks for it (docs/audit.md,
"Append-only"), and deleting a project or an account leaves their events as they were."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

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
