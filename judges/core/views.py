"""What the judges' pages share: submitting a form that starts a job."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.contrib import messages
from django.core.exceptions import ValidationError

from annotation.core.jobs import BrokerUnavailable
from config.errors import status_for
from judges.core.forms import add_service_errors

_T = TypeVar("_T")


def submit(request, form, start: Callable[[], _T]) -> tuple[_T | None, int]:
    """What ``start()`` made and 200; or None, with the service's field errors put on the form
    (200), or the broker's refusal as a message with its status."""
    try:
        return start(), 200
    except ValidationError as exc:
        add_service_errors(form, exc)
        return None, 200
    except BrokerUnavailable as exc:
        messages.error(request, str(exc))
        return None, status_for(exc)
