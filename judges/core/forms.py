"""What the judges' forms share: a service's field errors shown on the form."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError


def add_service_errors(form: forms.Form, exc: ValidationError) -> None:
    """A service's ``ValidationError`` on the form: on the field it names when the form has
    one, else above the fields."""
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)
