"""The audit log's filters, read from a query string by the page, its CSV and the API alike."""

from __future__ import annotations

from django import forms

from annotation.audit.actions import ACTIONS
from annotation.audit.selectors import AuditFilter
from annotation.models.audit import AUDIT_ACTOR_MAX_CHARS

_ACTION_CHOICES = [("", "Any action"), *sorted(ACTIONS.items(), key=lambda item: item[1])]


class AuditFilterForm(forms.Form):
    actor = forms.CharField(
        max_length=AUDIT_ACTOR_MAX_CHARS,
        required=False,
        label="Actor",
        help_text="Username of who made the change.",
        widget=forms.TextInput(attrs={"list": "audit-actors"}),
    )
    action = forms.ChoiceField(choices=_ACTION_CHOICES, required=False, label="Action")
    since = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean(self) -> dict:
        cleaned = super().clean() or {}
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and until < since:
            self.add_error("until", "Must be on or after the From date.")
        return cleaned

    def audit_filter(self) -> AuditFilter:
        """The filter of a valid form."""
        data = self.cleaned_data
        return AuditFilter(
            actor=data["actor"].strip(),
            action=data["action"],
            since=data["since"],
            until=data["until"],
        )

    def error_text(self) -> str:
        """Every error, each naming its field."""
        return " ".join(
            f"{field}: {' '.join(map(str, errors))}" for field, errors in self.errors.items()
        )
