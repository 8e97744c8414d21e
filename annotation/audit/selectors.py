"""Reading the audit log: a project's events (or the site-wide ones) through the filters of
the audit page, its CSV and its API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from annotation.models import AuditEvent, Project

# Rows the CSV download reads from the database at a time.
CSV_BATCH = 500
CSV_HEADER = (
    "created_at",
    "project",
    "actor",
    "actor_role",
    "action",
    "target_type",
    "target_id",
    "target",
    "before",
    "after",
    "request_id",
)


@dataclass(frozen=True)
class AuditFilter:
    """Which events to show: by the actor's username, the action, and days (inclusive, in the
    site's time zone); empty values do not filter."""

    actor: str = ""
    action: str = ""
    since: date | None = None
    until: date | None = None


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def audit_events(*, project: Project | None, filters: AuditFilter) -> QuerySet[AuditEvent]:
    """The events of ``project`` (None: the site-wide ones, which belong to no project),
    newest first, through ``filters``."""
    if project is None:
        rows = AuditEvent.objects.filter(project_ref__isnull=True)
    else:
        rows = AuditEvent.objects.filter(project_ref=project.pk)
    if filters.actor:
        rows = rows.filter(actor_label=filters.actor)
    if filters.action:
        rows = rows.filter(action=filters.action)
    if filters.since is not None:
        rows = rows.filter(created_at__gte=_day_start(filters.since))
    if filters.until is not None:
        rows = rows.filter(created_at__lt=_day_start(filters.until + timedelta(days=1)))
    return rows.order_by("-created_at", "-id")


def audit_actors(*, project: Project | None) -> list[str]:
    """The usernames that appear as actors in the project's log (for the actor filter)."""
    rows = audit_events(project=project, filters=AuditFilter())
    return list(
        rows.exclude(actor_label="")
        .order_by("actor_label")
        .values_list("actor_label", flat=True)
        .distinct()
    )


def _json(value: object) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, sort_keys=True, ensure_ascii=False)


def audit_csv_rows(events: QuerySet[AuditEvent]) -> Iterator[tuple[object, ...]]:
    """The CSV rows of ``events``, read from the database a batch at a time."""
    for event in events.iterator(chunk_size=CSV_BATCH):
        yield (
            event.created_at.isoformat(),
            event.project_slug,
            event.actor_label,
            event.actor_role,
            event.action,
            event.target_type,
            event.target_ref,
            event.target_label,
            _json(event.before),
            _json(event.after),
            event.request_id,
        )


# The triggers that keep the log append-only (migrations 0033 and 0034).
AUDIT_TRIGGERS = ("annotation_auditevent_append_only", "annotation_auditevent_no_truncate")


def audit_table_exposure() -> list[str]:
    """What the current database role could do to the audit log past its triggers, one
    sentence each (none: the role can only read and add events; docs/audit.md, "Hardening")."""
    table = AuditEvent._meta.db_table
    problems = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, r.rolsuper, pg_has_role(current_user, c.relowner, 'USAGE'),"
            " pg_get_userbyid(c.relowner),"
            " has_table_privilege(current_user, c.oid, 'TRUNCATE'),"
            " has_table_privilege(current_user, c.oid, 'TRIGGER')"
            " FROM pg_class c, pg_roles r WHERE c.oid = %s::regclass AND r.rolname = current_user",
            [table],
        )
        role, superuser, owner, owner_name, truncate, trigger = cursor.fetchone()
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND tgenabled <> 'D'",
            [table],
        )
        enabled = {name for (name,) in cursor.fetchall()}
    if superuser:
        problems.append(
            f"{role} is a superuser: it can disable the triggers, empty and drop {table}."
        )
    elif owner:
        problems.append(
            f"{role} owns {table} (as {owner_name}): it can disable the triggers and drop it."
        )
    if truncate and not superuser:
        problems.append(f"{role} holds TRUNCATE on {table} (the trigger still refuses it).")
    if trigger and not (superuser or owner):
        problems.append(f"{role} holds TRIGGER on {table}: it can add triggers to it.")
    problems.extend(
        f"The trigger {name} is missing or disabled."
        for name in AUDIT_TRIGGERS
        if name not in enabled
    )
    return problems
