"""The Audit log tab, its CSV and the audit API: curators and operators read a project's log,
filtered by actor, action and days; other members get 403, outsiders 404; bad filters are
refused naming the field; the site-wide log is the operators' (docs/audit.md)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from annotation.audit.services import audit_record
from annotation.audit.views import EVENTS_PER_PAGE
from annotation.models import AuditEvent
from tests.annotation.projects.test_settings_page import settings_data
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PAGE = "/p/demo/audit/"
CSV = "/p/demo/audit/audit.csv"
API = "/api/v1/projects/demo/audit/"


def _record(project, actor, action="project.paused", **fields):
    target = fields.pop("target", project)
    return audit_record(actor=actor, project=project, action=action, target=target, **fields)


@pytest.fixture
def log(project, other_project, carol, dave):
    """Three events of the project (one by dave, one of a week ago) and one of another."""
    _record(project, carol, before={"paused": False}, after={"paused": True})
    _record(project, dave, "release.created", target_label="=HYPERLINK(1)")
    old = _record(project, carol, "member.added", after={"user": "<b>x</b>"})
    # Moving an event in time needs an UPDATE, which the log refuses: insert a copy instead.
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                created_at=timezone.now() - timedelta(days=7),
                project_ref=old.project_ref,
                project_slug=old.project_slug,
                actor_label="carol",
                actor_role="curator",
                action="webhook.created",
                target_type="webhookendpoint",
                target_label="http://old",
            )
        ]
    )
    _record(other_project, None, "project.settings_changed", after={"name": "Other"})


def _rows(response) -> list[dict]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_a_curator_reads_the_log_newest_first_escaped(client_for, carol, log):
    response = client_for(carol).get(PAGE)
    assert response.status_code == 200
    actions = [event.action for event in response.context["page"].object_list]
    assert actions == ["member.added", "release.created", "project.paused", "webhook.created"]
    body = response.content.decode()
    assert "&lt;b&gt;x&lt;/b&gt;" in body
    assert "<b>x</b>" not in body
    assert "Other project" not in body  # the other project's event
    assert 'href="/p/demo/audit/"' in body  # the tab


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("actor=dave", ["release.created"]),
        ("action=project.paused", ["project.paused"]),
        ("since={week_ago}&until={week_ago}", ["webhook.created"]),
        ("since={today}", ["member.added", "release.created", "project.paused"]),
        ("actor=nobody", []),
    ],
)
def test_filters(client_for, carol, log, query, expected):
    today = timezone.localdate()
    query = query.format(today=today, week_ago=today - timedelta(days=7))
    response = client_for(carol).get(f"{PAGE}?{query}")
    assert [event.action for event in response.context["page"].object_list] == expected
    csv_response = client_for(carol).get(f"{CSV}?{query}")
    assert [row["action"] for row in _rows(csv_response)] == expected
    api = client_for(carol).get(f"{API}?{query}")
    assert [event["action"] for event in api.json()["results"]] == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("since=yesterday", "since"),
        ("since=2026-02-10&until=2026-02-01", "until"),
        ("action=project.deleted_everything", "action"),
        ("actor=" + "x" * 200, "actor"),
    ],
)
def test_bad_filters_are_refused_naming_the_field(client_for, carol, log, query, field):
    client = client_for(carol)
    page = client.get(f"{PAGE}?{query}")
    assert page.status_code == 400
    assert f"{field}:" in page.content.decode()
    download = client.get(f"{CSV}?{query}")
    assert download.status_code == 400
    assert download.content.decode().startswith(f"{field}:")
    api = client.get(f"{API}?{query}")
    assert api.status_code == 400
    assert field in api.json()


def test_the_csv_streams_the_filtered_rows_defused(client_for, carol, log):
    response = client_for(carol).get(CSV)
    assert response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="demo-audit.csv"'
    rows = _rows(response)
    assert len(rows) == 4
    created = next(row for row in rows if row["action"] == "release.created")
    assert created["target"] == "'=HYPERLINK(1)"
    assert (created["actor"], created["actor_role"], created["project"]) == (
        "dave",
        "researcher",
        "demo",
    )
    paused = next(row for row in rows if row["action"] == "project.paused")
    assert (paused["before"], paused["after"]) == ('{"paused": false}', '{"paused": true}')


def test_the_page_is_paginated(client_for, carol, project):
    AuditEvent.objects.bulk_create(
        AuditEvent(project_ref=project.pk, project_slug="demo", action="project.paused")
        for _ in range(EVENTS_PER_PAGE + 3)
    )
    client = client_for(carol)
    first = client.get(f"{PAGE}?action=project.paused")
    assert len(first.context["page"].object_list) == EVENTS_PER_PAGE
    assert "action=project.paused&amp;page=2" in first.content.decode()
    second = client.get(f"{PAGE}?action=project.paused&page=2")
    assert len(second.context["page"].object_list) == 3
    api = client.get(f"{API}?limit=2")
    assert api.json()["count"] == EVENTS_PER_PAGE + 3
    assert len(api.json()["results"]) == 2


@pytest.mark.parametrize("url", [PAGE, CSV, API])
def test_outsiders_get_404_and_other_members_403(client, url, log, eve, alice, dave):
    client.force_login(eve)
    assert client.get(url).status_code == 404
    for member in (alice, dave):
        client.force_login(member)
        assert client.get(url).status_code == 403
    client.logout()
    assert client.get(url).status_code in (302, 401, 403)


@pytest.mark.parametrize("url", [PAGE, CSV, API])
def test_operators_read_any_projects_log(client, url, log):
    client.force_login(UserFactory(username="op", is_staff=True))
    assert client.get(url).status_code == 200


def test_the_site_wide_log_is_the_operators(client, project, carol):
    audit_record(actor=carol, project=None, action="api_token.created", target=None)
    _record(project, carol)
    client.force_login(carol)
    assert client.get("/audit/").status_code == 403
    assert client.get("/audit/audit.csv").status_code == 403
    client.force_login(UserFactory(username="op", is_staff=True))
    page = client.get("/audit/")
    assert [e.action for e in page.context["page"].object_list] == ["api_token.created"]
    assert [row["action"] for row in _rows(client.get("/audit/audit.csv"))] == ["api_token.created"]


def test_the_page_records_its_request_id(client_for, carol, project):
    saved = client_for(carol).post(
        reverse("project-settings-save", args=[project.slug]),
        settings_data(project, name="Renamed"),
        HTTP_X_REQUEST_ID="audit-request-0001",
    )
    assert saved.status_code == 302
    events = AuditEvent.objects.filter(request_id="audit-request-0001")
    assert [(event.action, event.actor_label) for event in events] == [
        ("project.settings_changed", "carol")
    ]


def test_a_client_chosen_request_id_is_recorded_only_when_well_formed(client_for, carol, project):
    url = reverse("project-settings-save", args=[project.slug])
    for given, name in (("<script>x</script>", "one"), ("ok-request-0002", "two")):
        saved = client_for(carol).post(
            url, settings_data(project, name=name), HTTP_X_REQUEST_ID=given
        )
        assert saved.status_code == 302
    bad, good = AuditEvent.objects.filter(action="project.settings_changed").order_by("id")
    assert good.request_id == "ok-request-0002"
    assert bad.request_id != "<script>x</script>"
    assert len(bad.request_id) == 32  # a fresh id in its place


def test_a_change_through_the_api_names_its_caller(api_for, carol, project, settings):
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = True
    hook = {"url": "http://127.0.0.1:9/hook", "events": ["pair.decided"]}
    created = api_for(carol).post(f"/api/v1/projects/{project.slug}/webhooks/", hook, format="json")
    assert created.status_code == 201
    (event,) = AuditEvent.objects.all()
    assert (event.action, event.actor_label, event.actor_role) == (
        "webhook.created",
        "carol",
        "curator",
    )
    assert created.json()["secret"] not in str(event.after)


def test_the_api_is_in_the_schema():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/v1/projects/{slug}/audit/"]["get"]
    names = {parameter["name"] for parameter in operation["parameters"]}
    assert {"actor", "action", "since", "until", "limit", "offset"} <= names
