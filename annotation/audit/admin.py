"""The admin's changes in the audit log: operators who add, change or delete a row in the
Django admin (a project, a member, a pair's queue fields, a judge) leave ``admin.added``,
``admin.changed`` or ``admin.deleted`` with the fields the form changed (docs/audit.md).
The admin saves in a transaction of its own, so the event commits with the change."""

from __future__ import annotations

from django.contrib import admin
from django.db import models

from annotation.audit.services import audit_record
from annotation.models import Project


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
    if isinstance(obj, Project):
        return obj
    project = getattr(obj, "project", None)
    return project if isinstance(project, Project) else None


def _record(request, obj: models.Model, action: str, before: dict, after: dict) -> None:
    audit_record(
        actor=request.user,
        project=_project_of(obj),
        action=action,
        target=obj,
        before=before,
        after=after,
    )


def _form_changes(form) -> tuple[dict, dict]:
    fields = form.changed_data
    before = {field: _plain(form.initial.get(field)) for field in fields}
    return before, {field: _plain(form.cleaned_data.get(field)) for field in fields}


def _deleted(obj: models.Model) -> dict:
    return {"deleted": str(obj)}


class AuditedAdmin(admin.ModelAdmin):
    """A model admin whose saves and deletions, its inlines' included, are audited."""

    def save_model(self, request, obj, form, change) -> None:
        before, after = _form_changes(form)
        super().save_model(request, obj, form, change)
        if change and not after:
            return
        _record(
            request,
            obj,
            "admin.changed" if change else "admin.added",
            before if change else {},
            after,
        )

    def delete_model(self, request, obj) -> None:
        _record(request, obj, "admin.deleted", _deleted(obj), {})
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        for obj in queryset:
            _record(request, obj, "admin.deleted", _deleted(obj), {})
        super().delete_queryset(request, queryset)

    def save_formset(self, request, form, formset, change) -> None:
        removed = [f.instance for f in formset.deleted_forms if f.instance.pk is not None]
        changed = [
            (f, f.instance.pk is None, *_form_changes(f))
            for f in formset.forms
            if f.has_changed() and f not in formset.deleted_forms
        ]
        for obj in removed:
            _record(request, obj, "admin.deleted", _deleted(obj), {})
        super().save_formset(request, form, formset, change)
        for inline, added, before, after in changed:
            action = "admin.added" if added else "admin.changed"
            _record(request, inline.instance, action, {} if added else before, after)
