"""Reading the audit log: a project's events (or the site-wide ones) through the filters of
the audit page, its CSV and its API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.core.serializers.json import DjangoJSONEncoder
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
