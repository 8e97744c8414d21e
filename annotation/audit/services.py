"""Writing the audit log: ``audit_record``, called by each service that makes an audited change,
inside that service's transaction, so the change and its event commit or roll back together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db import models

from annotation.audit.actions import ACTIONS
from annotation.core.access import is_operator
from annotation.models import AuditEvent, Membership, Project
from annotation.models.audit import (
    AUDIT_ACTOR_MAX_CHARS,
    AUDIT_LABEL_MAX_CHARS,
    AUDIT_REQUEST_ID_MAX_CHARS,
)
from config.logging import current_request_id

# The longest text value an event keeps whole.
AUDIT_TEXT_MAX_CHARS = 2000
# The role recorded for a staff member or superuser acting where they hold no project role.
OPERATOR = "operator"


def audit_changes(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields whose values differ, as (before, after) with those fields only."""
    changed = [field for field in after if before.get(field) != after[field]]
    old = {field: before.get(field) for field in changed}
    return old, {field: after[field] for field in changed}


def audit_url(url: str) -> str:
    """``url`` as the log keeps it: without its user and password, query string and fragment,
    where a receiver's token often travels (``https://hooks.example/in?token=...``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _small(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``values`` with each long text cut to its start and its length (a project's guidelines
    may hold 100,000 characters)."""
    return {
        field: f"{value[:AUDIT_TEXT_MAX_CHARS]}… ({len(value):,} characters)"
        if isinstance(value, str) and len(value) > AUDIT_TEXT_MAX_CHARS
        else value
        for field, value in (values or {}).items()
    }


def actor_role(*, actor, project: Project | None) -> str:
    """The actor's role when they act: their project role, else "operator" for staff and
    superusers, else "" (their own account; the command line has no actor)."""
    if actor is None or not actor.is_authenticated:
        return ""
    if project is not None:
        role = (
            Membership.objects.filter(project=project, user=actor)
            .values_list("role", flat=True)
            .first()
        )
        if role:
            return role
    return OPERATOR if is_operator(actor) else ""


def audit_record(
    *,
    actor,
    project: Project | None,
    action: str,
    target: models.Model | None,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    target_label: str | None = None,
    target_type: str | None = None,
    target_ref: str | None = None,
) -> AuditEvent:
    """Records that ``actor`` (None: the command line or background work) did ``action`` to
        ``target`` in ``project`` (None: site-wide), with the changed fields ``before`` and
        ``after``. Call it inside the transaction that makes the change. ``target_label`` and
        ``target_type`` name a target that is no single row (a set of pairs); ``target_ref``
    replaces its id where the id is a secret (DRF's token, whose key is its id)."""
    if action not in ACTIONS:
        raise ValueError(
            f"action: {action!r} is not an audited action (annotation/audit/actions.py)"
        )
    person = actor if actor is not None and actor.is_authenticated else None
    label = str(target) if target_label is None and target is not None else target_label or ""
    return AuditEvent.objects.create(
        project_ref=project.pk if project is not None else None,
        project_slug=project.slug if project is not None else "",
        actor_ref=person.pk if person is not None else None,
        actor_label=person.get_username()[:AUDIT_ACTOR_MAX_CHARS] if person is not None else "",
        actor_role=actor_role(actor=person, project=project),
        action=action,
        target_type=target_type or (str(target._meta.model_name) if target is not None else ""),
        target_ref=target_ref
        if target_ref is not None
        else (str(target.pk) if target is not None else ""),
        target_label=label[:AUDIT_LABEL_MAX_CHARS],
        before=_small(before),
        after=_small(after),
        request_id=(current_request_id.get() or "")[:AUDIT_REQUEST_ID_MAX_CHARS],
    )
