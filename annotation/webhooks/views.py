"""The Webhooks tab (docs/webhooks.md, "The Webhooks page"): a project's endpoints, adding one
(its secret shown once), an endpoint's settings and delivery log, Rotate secret, Send test,
Remove, and Redeliver on any delivery. Curators only: other members get 403, outsiders 404."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from annotation.core.access import CURATORS, get_project_for_user
from annotation.core.errors import InvalidInput
from annotation.models import SUBSCRIBABLE_EVENTS, WebhookEndpoint, WebhookEventKind
from annotation.webhooks import selectors, services

_EVENT_CHOICES = [(kind, WebhookEventKind(kind).label) for kind in SUBSCRIBABLE_EVENTS]


class WebhookForm(forms.Form):
    """An endpoint's settings; the services check them (their errors land on the field)."""

    url = forms.CharField(
        max_length=services.MAX_URL_CHARS,
        label="URL",
        help_text="http(s) address that receives a signed POST for each event.",
    )
    description = forms.CharField(
        max_length=services.MAX_DESCRIPTION_CHARS, required=False, label="Description"
    )
    events = forms.MultipleChoiceField(
        choices=_EVENT_CHOICES, widget=forms.CheckboxSelectMultiple, label="Events"
    )
    active = forms.BooleanField(required=False, initial=True, label="Active")

    def apply(self, call) -> WebhookEndpoint | None:
        """``call(**cleaned_data)``, or None with the service's refusal on its field."""
        if not self.is_valid():
            return None
        try:
            return call(**self.cleaned_data)
        except InvalidInput as exc:
            field, _, message = str(exc).partition(": ")
            self.add_error(field if field in self.fields else None, message or str(exc))
            return None


def _endpoint_of(request, slug: str, webhook_id: int):
    project, role = get_project_for_user(request.user, slug, roles=CURATORS)
    return project, role, selectors.webhook_of_project(project=project, webhook_id=webhook_id)


@require_http_methods(["GET", "POST"])
@never_cache
@login_required
def webhooks(request, slug: str):
    project, role = get_project_for_user(request.user, slug, roles=CURATORS)
    form = WebhookForm(request.POST if request.method == "POST" else None)
    created = None
    if form.is_bound:
        created = form.apply(
            lambda **fields: services.webhook_create(project=project, actor=request.user, **fields)
        )
        if created is not None:
            form = WebhookForm()
    context = {
        "project": project,
        "role": role,
        "endpoints": selectors.project_webhooks(project=project),
        "form": form,
        "created": created,
    }
    status = 400 if form.is_bound and form.errors else 200
    return render(request, "annotation/webhooks.html", context, status=status)


@require_http_methods(["GET", "POST"])
@never_cache
@login_required
def webhook_detail(request, slug: str, webhook_id: int):
    project, role, endpoint = _endpoint_of(request, slug, webhook_id)
    initial = {
        "url": endpoint.url,
        "description": endpoint.description,
        "events": endpoint.events,
        "active": endpoint.active,
    }
    form = WebhookForm(request.POST if request.method == "POST" else None, initial=initial)
    if form.is_bound and form.apply(
        lambda **fields: services.webhook_update(endpoint=endpoint, actor=request.user, **fields)
    ):
        messages.success(request, "Webhook saved.")
        return redirect("webhook", project.slug, endpoint.pk)
    context = {
        "project": project,
        "role": role,
        "endpoint": endpoint,
        "form": form,
        "log": selectors.webhook_log(endpoint=endpoint),
    }
    status = 400 if form.is_bound else 200
    return render(request, "annotation/webhook_detail.html", context, status=status)


@require_POST
@login_required
def webhook_action(request, slug: str, webhook_id: int, action: str):
    project, role, endpoint = _endpoint_of(request, slug, webhook_id)
    if action == "rotate":
        secret = services.webhook_secret_rotate(endpoint=endpoint, actor=request.user)
        context = {"project": project, "role": role, "endpoint": endpoint, "secret": secret}
        return render(request, "annotation/webhook_secret.html", context)
    if action == "test":
        services.webhook_test(endpoint=endpoint)
        messages.success(request, "Test event queued: its delivery shows in the log below.")
    elif action == "delete":
        services.webhook_delete(endpoint=endpoint, actor=request.user)
        messages.success(request, f"Webhook {endpoint.url} removed.")
        return redirect("webhooks", project.slug)
    else:
        raise Http404("No such action")
    return redirect("webhook", project.slug, endpoint.pk)


@require_POST
@login_required
def webhook_redeliver(request, slug: str, webhook_id: int, delivery_id: int):
    project, _role, endpoint = _endpoint_of(request, slug, webhook_id)
    delivery = selectors.delivery_of_webhook(endpoint=endpoint, delivery_id=delivery_id)
    services.webhook_redeliver(delivery=delivery)
    messages.success(request, "Delivery queued again, with the same webhook-id.")
    return redirect("webhook", project.slug, endpoint.pk)
