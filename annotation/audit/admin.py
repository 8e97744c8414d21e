"""The admin's changes in the audit log: operators who add, change or delete a row in the
Django admin (a project, a member, a pair's queue fields, a judge, an account, a second
factor, a sign-in identity, a token) leave ``admin.added``, ``admin.changed`` or
``admin.deleted`` with the fields the form changed, a secret's as "(changed)" (docs/audit.md).
The admin saves in a transaction of its own, so the event commits with the change."""

from __future__ import annotations

import contextlib

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.forms import ModelChoiceField

from annotation.audit.actions import SECRET_CHANGED
from annotation.audit.services import audit_record
from annotation.models import Project

# Form fields whose values never enter the log, only that they changed.
SECRET_FIELDS = frozenset(
    {"password", "password1", "password2", "secret", "key", "token", "token_secret"}
)


def _plain(value: object) -> object:
    """A form value as JSON can hold it: rows by their name, collections item by item."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple | set | models.QuerySet):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return str(value)


def _project_of(obj: models.Model) -> Project | None:
    """The project a row belongs to (through its pair for votes, skips and flags); None for a
    site-wide row (an account, a medium), whose events go to the site-wide log."""
    if isinstance(obj, Project):
        return obj
    project = getattr(obj, "project", None)
    pair = getattr(obj, "pair", None)
    if project is None and isinstance(pair, models.Model):
        project = getattr(pair, "project", None)
    return project if isinstance(project, Project) else None


def _form_changes(form, secrets: frozenset[str] = SECRET_FIELDS) -> tuple[dict, dict]:
    fields = form.changed_data

    def value(field: str, values) -> object:
        if field in secrets:
            return SECRET_CHANGED
        given, kind = values.get(field), form.fields.get(field)
        # A raw id field's initial value is the id; its cleaned value, the row.
        if isinstance(kind, ModelChoiceField) and isinstance(given, int | str) and given != "":
            with contextlib.suppress(ValidationError):
                given = kind.to_python(given)
        return _plain(given)

    before = {field: value(field, form.initial) for field in fields if field not in secrets}
    return before, {field: value(field, form.cleaned_data) for field in fields}


class AuditedAdmin(admin.ModelAdmin):
    """A model admin whose saves and deletions, its inlines' included, are audited."""

    # Fields recorded as "(changed)", never by value.
    audit_secret_fields: frozenset[str] = SECRET_FIELDS

    def audit_label(self, obj: models.Model) -> str:
        """How the log names ``obj`` (a subclass names one whose ``str`` is a secret)."""
        return str(obj)

    def audit_record(
        self,
        request,
        obj: models.Model,
        action: str,
        before: dict,
        after: dict,
        target_ref: str | None = None,
    ) -> None:
        audit_record(
            actor=request.user,
            project=_project_of(obj),
            action=action,
            target=obj,
            target_ref=target_ref,
            target_label=self.audit_label(obj),
            before=before,
            after=after,
        )

    def _deleted(self, request, obj: models.Model) -> None:
        self.audit_record(request, obj, "admin.deleted", {"deleted": self.audit_label(obj)}, {})

    def save_model(self, request, obj, form, change) -> None:
        before, after = _form_changes(form, self.audit_secret_fields)
        super().save_model(request, obj, form, change)
        if change and not after:
            return
        self.audit_record(
            request,
            obj,
            "admin.changed" if change else "admin.added",
            before if change else {},
            after,
        )

    def delete_model(self, request, obj) -> None:
        self._deleted(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        for obj in queryset:
            self._deleted(request, obj)
        super().delete_queryset(request, queryset)

    def save_formset(self, request, form, formset, change) -> None:
        removed = [f.instance for f in formset.deleted_forms if f.instance.pk is not None]
        changed = [
            (f, f.instance.pk is None, *_form_changes(f, self.audit_secret_fields))
            for f in formset.forms
            if f.has_changed() and f not in formset.deleted_forms
        ]
        for obj in removed:
            self._deleted(request, obj)
        super().save_formset(request, form, formset, change)
        for inline, added, before, after in changed:
            action = "admin.added" if added else "admin.changed"
            self.audit_record(request, inline.instance, action, {} if added else before, after)
