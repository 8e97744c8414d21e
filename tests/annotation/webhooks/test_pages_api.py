"""The Webhooks tab and API (docs/webhooks.md): curators only (other members 403, outsiders
404), CSRF on every post, bad input refused on the field it names, the secret shown once."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import WebhookDelivery, WebhookEndpoint
from annotation.webhooks.delivery import webhook_deliveries_send_due

pytestmark = pytest.mark.django_db


def _make(client, url: str, events=("pair.decided",)):
    return client.post(reverse("webhooks", args=["demo"]), {"url": url, "events": list(events)})


def test_a_curator_adds_a_webhook_and_sees_its_secret_once(client_for, carol, receiver):
    target = receiver()
    client = client_for(carol)
    page = _make(client, target.url)
    assert page.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret.startswith("whsec_")
    assert endpoint.secret in page.content.decode()
    listing = client.get(reverse("webhooks", args=["demo"])).content.decode()
    assert target.url in listing
    assert endpoint.secret not in listing
    detail = client.get(reverse("webhook", args=["demo", endpoint.pk])).content.decode()
    assert endpoint.secret not in detail


def test_the_form_names_the_field_it_refuses(client_for, carol, settings):
    client = client_for(carol)
    page = _make(client, "ftp://example.com/hook")
    assert page.status_code == 400
    assert page.context["form"].errors["url"] == ["only http and https URLs are allowed."]
    page = _make(client, "http://example.com/hook", events=())
    assert "events" in page.context["form"].errors
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = False
    page = _make(client, "http://127.0.0.1:9/hook")
    assert "not a public address" in page.context["form"].errors["url"][0]
    assert WebhookEndpoint.objects.count() == 0


def test_test_rotate_redeliver_and_remove_from_the_page(client_for, carol, receiver):
    target = receiver()
    client = client_for(carol)
    _make(client, target.url)
    endpoint = WebhookEndpoint.objects.get()
    old_secret = endpoint.secret
    client.post(reverse("webhook-action", args=["demo", endpoint.pk, "test"]))
    webhook_deliveries_send_due()
    assert [r.headers["webhook-id"] for r in target.requests]
    rotated = client.post(reverse("webhook-action", args=["demo", endpoint.pk, "rotate"]))
    endpoint.refresh_from_db()
    assert endpoint.secret != old_secret
    assert endpoint.secret in rotated.content.decode()
    delivery = WebhookDelivery.objects.get()
    client.post(reverse("webhook-redeliver", args=["demo", endpoint.pk, delivery.pk]))
    webhook_deliveries_send_due()
    assert len(target.requests) == 2
    assert target.requests[0].headers["webhook-id"] == target.requests[1].headers["webhook-id"]
    page = client.get(reverse("webhook", args=["demo", endpoint.pk])).content.decode()
    assert "webhook.test" in page
    assert "HTTP 200" in page
    client.post(reverse("webhook-action", args=["demo", endpoint.pk, "delete"]))
    assert not WebhookEndpoint.objects.exists()


def test_posts_need_the_csrf_token(carol, receiver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    assert _make(client, receiver().url).status_code == 403
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("who", ["alice", "dave", "outsider_curator"])
def test_only_the_projects_curators_reach_the_pages(request, client_for, carol, who, hooked):
    endpoint = hooked("http://127.0.0.1:9/hook")
    user = request.getfixturevalue(who)
    client = client_for(user)
    expected = 404 if who == "outsider_curator" else 403
    urls = [
        ("get", reverse("webhooks", args=["demo"])),
        ("get", reverse("webhook", args=["demo", endpoint.pk])),
        ("post", reverse("webhook-action", args=["demo", endpoint.pk, "rotate"])),
        ("post", reverse("webhook-action", args=["demo", endpoint.pk, "delete"])),
    ]
    for method, url in urls:
        assert getattr(client, method)(url).status_code == expected, url
    assert WebhookEndpoint.objects.filter(secret=endpoint.secret).exists()


def test_the_api_adds_lists_changes_and_logs(api_for, carol, receiver):
    target = receiver()
    api = api_for(carol)
    base = "/api/v1/projects/demo/webhooks/"
    made = api.post(base, {"url": target.url, "events": ["release.built"]}, format="json")
    assert made.status_code == 201
    assert made.json()["secret"].startswith("whsec_")
    listed = api.get(base).json()
    assert [row["url"] for row in listed] == [target.url]
    assert "secret" not in listed[0]
    pk = made.json()["id"]
    changed = api.patch(f"{base}{pk}/", {"events": ["pair.decided"]}, format="json")
    assert changed.json()["events"] == ["pair.decided"]
    assert api.post(f"{base}{pk}/test/").status_code == 202
    webhook_deliveries_send_due()
    log = api.get(f"{base}{pk}/deliveries/").json()
    assert log[0]["event"] == "webhook.test"
    assert log[0]["log"][0]["status_code"] == 200
    again = api.post(f"{base}{pk}/deliveries/{log[0]['id']}/redeliver/")
    assert again.json()["status"] == "pending"
    rotated = api.post(f"{base}{pk}/rotate-secret/").json()["secret"]
    assert rotated != made.json()["secret"]
    assert api.delete(f"{base}{pk}/").status_code == 204


def test_the_api_refuses_bad_input_naming_the_field(api_for, carol):
    api = api_for(carol)
    base = "/api/v1/projects/demo/webhooks/"
    wrong_kind = api.post(
        base, {"url": "http://x.example/", "events": ["vote.cast"]}, format="json"
    )
    assert wrong_kind.status_code == 400
    assert "events" in wrong_kind.json()
    unknown = api.post(base, {"url": "http://x.example/", "events": [], "x": 1}, format="json")
    assert "x" in unknown.json()
    bad_url = api.post(base, {"url": "gopher://x/", "events": ["pair.decided"]}, format="json")
    assert bad_url.status_code == 400
    assert "url: only http and https" in str(bad_url.json())


@pytest.mark.parametrize("who", ["alice", "outsider_curator"])
def test_the_api_refuses_annotators_and_outsiders(request, api_for, carol, who, hooked):
    endpoint = hooked("http://127.0.0.1:9/hook")
    api = api_for(request.getfixturevalue(who))
    expected = 404 if who == "outsider_curator" else 403
    base = "/api/v1/projects/demo/webhooks/"
    assert api.get(base).status_code == expected
    assert api.post(base, {"url": "http://x.example/", "events": ["pair.decided"]}).status_code == (
        expected
    )
    assert api.post(f"{base}{endpoint.pk}/rotate-secret/").status_code == expected
    assert api.get(f"{base}{endpoint.pk}/deliveries/").status_code == expected
