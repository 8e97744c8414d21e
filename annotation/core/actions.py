"""A curator's action posted from a page (a queue lever, a bulk action on pairs): its form
validated, its service called, and what the service said flashed, or its refusal shown on
the form."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest

from annotation.core.errors import DomainError

FormT = TypeVar("FormT", bound=forms.Form)


def action_apply(
    request: HttpRequest,
    project: Any,
    actions: Mapping[str, tuple[Callable[..., FormT], Callable[[Any, dict, Any], str]]],
    action: str,
    *,
    unknown: str,
    **form_kwargs: Any,
) -> tuple[FormT, bool]:
    """The bound form of ``actions[action]`` (its form class takes the POST and the
    project) and whether its service ran (called with the project, the cleaned data and the
    acting user, for the audit log; it returns the message to flash): a form that does
    not validate, or a service's refusal (a ``DomainError``, added to the form), gives
    False. An action not in ``actions`` is a 404 saying ``unknown``."""
    if action not in actions:
        raise Http404(unknown)
    form_class, apply = actions[action]
    form = form_class(request.POST, project=project, **form_kwargs)
    if form.is_valid():
        try:
            message = apply(project, form.cleaned_data, request.user)
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, message)
            return form, True
    return form, False
