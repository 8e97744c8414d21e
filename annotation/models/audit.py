"""The audit log (docs/audit.md): one row per change a curator, researcher or operator made,
written by the service that made it, in its transaction. The table is append-only in the
database itself (triggers refuse UPDATE, DELETE and TRUNCATE, migrations 0033 and 0034), so
it holds no foreign key: a project or account deleted later leaves its events as they were, named by
the id and label they had."""

from __future__ import annotations

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

AUDIT_ACTION_MAX_CHARS = 64
AUDIT_LABEL_MAX_CHARS = 200
# Longest name an account or project label keeps (Django's username is at most 150).
AUDIT_ACTOR_MAX_CHARS = 150
AUDIT_REQUEST_ID_MAX_CHARS = 128


class AuditEvent(models.Model):
    created_at = models.DateTimeField(default=timezone.now)
    # The project the change was made in, None for site-wide changes (judges, API tokens).
    # A plain column, not a foreign key: see the module's docstring.
    project_ref = models.BigIntegerField(null=True, blank=True)
    project_slug = models.CharField(max_length=80, blank=True)
    # Who made it: None for the command line and background work.
    actor_ref = models.BigIntegerField(null=True, blank=True)
    actor_label = models.CharField(max_length=AUDIT_ACTOR_MAX_CHARS, blank=True)
    # Their role when they made it: a project role, "operator", or "" (their own account,
    # the command line).
    actor_role = models.CharField(max_length=16, blank=True)
    action = models.CharField(max_length=AUDIT_ACTION_MAX_CHARS)
    target_type = models.CharField(max_length=32)
    target_ref = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=AUDIT_LABEL_MAX_CHARS, blank=True)
    # The changed fields only, before and after; a secret is recorded as changed, never shown.
    before = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    request_id = models.CharField(max_length=AUDIT_REQUEST_ID_MAX_CHARS, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project_ref", "-created_at"], name="audit_project_time_idx"),
            models.Index(fields=["-created_at"], name="audit_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label or 'command line'} at {self.created_at}"

    @property
    def changes(self) -> list[tuple[str, str, str]]:
        """Each recorded field with its value before and after, as JSON text ("" when the
        field was not there: added or removed)."""
        fields = [*self.before, *(field for field in self.after if field not in self.before)]
        return [(field, _text(self.before, field), _text(self.after, field)) for field in fields]


def _text(values: dict, field: str) -> str:
    if field not in values:
        return ""
    return json.dumps(values[field], cls=DjangoJSONEncoder, sort_keys=True, ensure_ascii=False)
