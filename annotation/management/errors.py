"""How the project commands turn a service's ValidationError into one line."""

from __future__ import annotations

from django.core.exceptions import ValidationError


def validation_message(exc: ValidationError) -> str:
    """``field: message`` for each error."""
    return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
